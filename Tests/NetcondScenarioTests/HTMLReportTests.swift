import Foundation
import NetcondCore
import NetcondProxy
import Testing

@testable import NetcondScenario

/// The HTML report drawn from a JSON report: every mark the evidence names is on the timeline,
/// each check carries its moments, text from the run is escaped, and what cannot be drawn is said.
@Suite struct HTMLReportTests {
    func outcome(_ name: String, passed: Bool, line: String = "done") -> ScenarioOutcome {
        let scenario = Scenario(
            name: name, description: "", file: "Scenarios/\(name).yaml", profile: Profile(name: "lte"), timeline: [],
            origin: OriginContent(), client: ClientSpec(command: ["wget", "x"]), checks: [])
        var cut = RunEvidence.Request(at: 0.2, path: "/files/big.bin", status: 200, bodyBytesSent: 500)
        cut.ended = 0.4
        cut.linkCut = .reset
        var resumed = RunEvidence.Request(
            at: 1.5, path: "/files/big.bin", range: "bytes=300-", status: 206, bodyBytesSent: 200)
        resumed.ended = 1.9
        var evidence = RunEvidence(
            exit: .exited(passed ? 0 : 8), timedOut: false, deadline: .seconds(60), duration: 2.0,
            requests: [cut, resumed], workingDirectory: "/nonexistent", origin: OriginContent())
        evidence.failedConnects = [
            RunEvidence.FailedConnect(at: 1.0, host: "origin.netcond.test", port: 80, outcome: .refused)
        ]
        evidence.lines = [RunEvidence.OutputLine(at: 1.95, stderr: false, text: line)]
        evidence.linkEvents = [
            RunEvidence.LinkEvent(at: 0.25, kind: .link, detail: "link: tunnel, outage (blackhole)"),
            RunEvidence.LinkEvent(at: 1.2, kind: .fault, detail: "fault 503 on GET /files/big.bin"),
        ]
        var resumes = CheckResult(
            name: "resumes", passed: passed, evidence: passed ? "cut at 300 → Range" : "asked for <all> & \"more\"")
        resumes.marks = [0.2, 0.4, 1.5]
        var outcome = ScenarioOutcome(
            scenario: scenario, seed: 42, command: ["curl", "-o", "out file"], evidence: evidence,
            results: [CheckResult(name: "completes", passed: true, evidence: "exit 0 after 2.00s"), resumes],
            applied: [(at: 0.3, what: "cut (reset)")], startup: 0.05, linkSummary: "lte: 2 s",
            clientOutput: ClientOutput(tail: line, stderrTail: ""))
        outcome.delivered = [
            DeliverySample(at: 0, bytes: 0), DeliverySample(at: 1, bytes: 300), DeliverySample(at: 2, bytes: 500),
        ]
        return outcome
    }

    func page(_ results: [ScenarioSuite.Result]) throws -> String {
        try HTMLReport.render(json: Data(ScenarioSuite.json(results, seconds: 4).utf8), source: "r.json")
    }

    @Test func theTimelineHasTheMarksTheEvidenceNames() throws {
        let html = try self.page([.ran(self.outcome("a", passed: false)), .ran(self.outcome("b", passed: true))])
        // Both requests (the resumed one with its Range), the refused attempt, the cut, the output line.
        #expect(html.contains(#"<g class="mark request broken" data-at="0.2" data-ended="0.4">"#))
        #expect(html.contains(#"<g class="mark request range" data-at="1.5" data-ended="1.9">"#))
        #expect(html.contains("Range: bytes=300-"))
        #expect(html.contains(#"<g class="mark attempt" data-at="1">"#))
        #expect(html.contains(#"<g class="mark link-event" data-at="0.3">"#))
        #expect(html.contains(#"<g class="mark output stdout" data-at="1.95">"#))
        // What the link recorded of itself: a phase with its outage, a fault applied.
        #expect(
            html.contains(
                #"<g class="mark link-state link" data-at="0.25"><title>+0.25s link: tunnel, outage (blackhole)</title>"#
            ))
        #expect(html.contains(#"<g class="mark link-state fault" data-at="1.2">"#))
        #expect(html.contains(#"<polyline class="delivered""#))
        // The check links to its moments, which are drawn for it.
        #expect(html.contains(#"data-marks="0.2 0.4 1.5""#))
        #expect(html.components(separatedBy: #"class="check-mark" data-check="resumes""#).count - 1 == 2 * 3)
        // The suite: one row per scenario, the failed one says why; the command that repeats it.
        #expect(
            html.contains(#"<tr class="row" data-verdict="failed">"#)
                && html.contains(#"<tr class="row" data-verdict="passed">"#))
        #expect(html.contains("netcond run Scenarios/a.yaml --seed 42 -- curl -o &apos;out file&apos;"))
        #expect(!html.contains("http://") && !html.contains("https://"), "no external resource")
    }

    /// A link that moves (2 Mbit/s and 40 ms, then 200 kbit/s and 120 ms from 1.5 s): the JSON
    /// keeps the moments it changed and the last; the link lane draws both as step lines.
    @Test func theLinkLaneDrawsTheRateAndDelayAsTheyMoved() throws {
        var outcome = self.outcome("moving", passed: true)
        let fast = LinkMoment(rate: .mbit(2), delay: .milliseconds(40), loss: 0)
        let slow = LinkMoment(rate: .kbit(200), delay: .milliseconds(120), loss: 0.01)
        outcome.delivered = [
            DeliverySample(at: 0, bytes: 0, link: fast), DeliverySample(at: 0.5, bytes: 100, link: fast),
            DeliverySample(at: 1.5, bytes: 300, link: slow), DeliverySample(at: 2, bytes: 500, link: slow),
        ]
        let json = ScenarioSuite.json([.ran(outcome)], seconds: 4)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let scenario = try #require((report["scenarios"] as? [[String: Any]])?.first)
        let rows = try #require(scenario["link"] as? [[Double]])
        #expect(rows == [[0, 2_000_000, 40, 0], [1.5, 200_000, 120, 0.01], [2, 200_000, 120, 0.01]])
        let html = try HTMLReport.render(json: Data(json.utf8), source: "r.json")
        // x = 250 + 840 × t / 2.04 (the run's 2 s and 2 % more); y from 102 (0) up to 76 (the run's most).
        #expect(
            html.contains(
                #"<polyline class="link-rate" points="250.0,76.0 867.6,76.0 867.6,99.4 1073.5,99.4 1073.5,99.4 1090.0,99.4">"#
            ))
        #expect(
            html.contains(
                #"<polyline class="link-delay" points="250.0,93.3 867.6,93.3 867.6,76.0 1073.5,76.0 1073.5,76.0 1090.0,76.0">"#
            ))
        #expect(html.contains("rate ▔ 2Mbit/s · delay ┄ 120 ms"))
        // A run whose engine said nothing of its link draws no rate and keeps the report readable.
        let plain = try self.page([.ran(self.outcome("plain", passed: true))])
        #expect(!plain.contains(#"<polyline class="link-rate""#))
    }

    /// Two destinations: the CDN's lane goes into a blackhole at 1 s and comes back at 1.5 s, the
    /// API's carries bytes throughout. The JSON keeps each lane's rows where something changed and
    /// the last; the HTML draws a lane per route with its states, its bytes and its total.
    @Test func eachDestinationHasALaneWithItsStateAndBytes() throws {
        var outcome = self.outcome("destinations", passed: true)
        func route(_ name: String, outage: String? = nil, down: Int64) -> ControlRoute {
            var route = ControlRoute(
                name: name, match: "host \(name)", state: LinkState(phase: name), link: [], connections: 1,
                bytesDown: down)
            route.outage = outage
            return route
        }
        outcome.delivered = [
            DeliverySample(at: 0, bytes: 0, routes: [route("cdn", down: 0), route("api", down: 0)]),
            DeliverySample(at: 0.5, bytes: 100, routes: [route("cdn", down: 2_048), route("api", down: 50)]),
            DeliverySample(
                at: 1, bytes: 200, routes: [route("cdn", outage: "blackhole", down: 2_048), route("api", down: 80)]),
            DeliverySample(
                at: 1.2, bytes: 300, routes: [route("cdn", outage: "blackhole", down: 2_048), route("api", down: 80)]),
            DeliverySample(at: 1.5, bytes: 400, routes: [route("cdn", down: 2_048), route("api", down: 90)]),
            DeliverySample(at: 2, bytes: 500, routes: [route("cdn", down: 4_096), route("api", down: 90)]),
        ]
        let json = ScenarioSuite.json([.ran(outcome)], seconds: 4)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let scenario = try #require((report["scenarios"] as? [[String: Any]])?.first)
        let lanes = try #require(scenario["routes"] as? [[String: Any]])
        #expect(lanes.map { $0["name"] as? String } == ["cdn", "api"])
        let cdn = try #require(lanes[0]["rows"] as? [[Any]])
        // 1.2 s repeats 1 s: left out.
        #expect(cdn.map { $0[0] as? Double } == [0, 0.5, 1, 1.5, 2])
        #expect(cdn[2][1] as? String == "cdn, outage (blackhole)" && cdn[4][2] as? Double == 4_096)
        let html = try HTMLReport.render(json: Data(json.utf8), source: "r.json")
        #expect(html.contains(#"<g class="route-lane" data-route="cdn">"#))
        #expect(html.contains(#"<g class="route-lane" data-route="api">"#))
        #expect(
            html.contains(
                #"<g class="mark link-state route-state" data-at="1"><title>+1s cdn, outage (blackhole)</title><rect class="span outage""#
            ))
        #expect(html.contains("4 KB down</text>") && html.contains("90 B down</text>"))
        #expect(html.components(separatedBy: #"class="delivered route-bytes""#).count - 1 == 2)
        // A run without routes has no such lane.
        let plain = try self.page([.ran(self.outcome("plain", passed: true))])
        #expect(!plain.contains("route-lane") && !plain.contains(#""routes""#))
    }

    /// The waterfall: a labelled row per request with its waiting part, the link's phases as named
    /// spans, the gaps between attempts with the wait the server asked for (red when the client
    /// came sooner), the bytes lane's scale, and the timeline's labels whole.
    @Test func theWaterfallDrawsEachRequestAndTheGapsBetweenAttempts() throws {
        var outcome = self.outcome("waterfall", passed: false)
        var first = RunEvidence.Request(at: 0.2, path: "/api/data", status: 503, retryAfter: "2", bodyBytesSent: 70)
        first.responded = 0.2
        first.ended = 0.25
        var second = RunEvidence.Request(at: 1.5, path: "/api/data", status: 200, bodyBytesSent: 20_480)
        second.responded = 1.9
        second.ended = 1.95
        second.received = 2.0
        outcome.evidence.requests = [first, second]
        outcome.evidence.failedConnects = []
        outcome.evidence.linkEvents = [
            RunEvidence.LinkEvent(at: 0, kind: .link, detail: "link: lte"),
            RunEvidence.LinkEvent(at: 0.5, kind: .link, detail: "link: lte, outage (blackhole)"),
            RunEvidence.LinkEvent(at: 1.0, kind: .link, detail: "link: lte"),
        ]
        outcome.applied = [(at: 0.5, what: "captive portal closes (after response 1 of /files/big.bin)")]
        let html = try self.page([.ran(outcome)])
        #expect(html.contains(#"<text class="request-label" x="4" y="#))
        #expect(html.contains(">GET /api/data 503 · 70 B</text>") && html.contains(">GET /api/data 200 · 20 KB</text>"))
        // 1.5 s to 1.9 s waiting on the server: a lighter part, and said in the title.
        #expect(html.contains(#"<rect class="wait" x="867.6""#))
        #expect(html.contains("waited 0.4s for the server"))
        // Its bar ends when its last byte reached the client, not when the origin sent it.
        #expect(html.contains(#"data-at="1.5" data-ended="2">"#))
        #expect(html.contains("sent by +1.95s, its last byte at the client +2s"))
        // The client came back 1.3 s after a response that asked for 2 s.
        #expect(
            html.contains(
                #"<g class="gap early"><title>1.3s, asked 2s between attempts: sooner than the server asked</title>"#))
        #expect(html.contains(#"<g class="retry-after">"#))
        // The outage is a span of its own, named; the phases around it are not outages.
        #expect(html.components(separatedBy: #"<rect class="span outage""#).count - 1 == 1)
        #expect(html.contains(">lte, outage (blackhole)</text>"))
        #expect(
            html.contains(">captive portal closes (after response 1 of /files/big.bin)</text>"), "whole, not clipped")
        #expect(html.contains(#"<text class="scale-label""#) && html.contains(">500 B</text>"))
        #expect(html.contains(#"<p class="legend">"#))
    }

    /// A client behind a closed portal: the request the portal answered is a row of its own, with
    /// the login page where the data was expected, among the origin's requests in time order.
    @Test func thePortalsPageIsDrawnWhereTheDataWasExpected() throws {
        var outcome = self.outcome("portal", passed: false)
        outcome.evidence.linkEvents = [
            RunEvidence.LinkEvent(at: 0, kind: .link, detail: "link: captive-hotel"),
            RunEvidence.LinkEvent(
                at: 0.04, kind: .captive,
                detail: "portal answered 200: GET http://origin.netcond.test/files/catalog.json"),
        ]
        let html = try self.page([.ran(outcome)])
        #expect(
            html.contains(
                #"<g class="mark request portal" data-at="0.04"><title>+0.04s GET http://origin.netcond.test/files/catalog.json → 200 from the captive portal: its login page, not what was asked for</title>"#
            ))
        #expect(
            html.contains(#"<text class="request-label portal" x="4" y="#)
                && html.contains(">GET /files/catalog.json 200 · login page</text>"))
        // First of the rows: it came before the origin's two requests.
        let portal = try #require(html.range(of: "request-label portal"))
        let origin = try #require(html.range(of: ">GET /files/big.bin 200"))
        #expect(portal.lowerBound < origin.lowerBound)
        #expect(html.contains("the captive portal's page, not the data"))
    }

    /// A response still on its way when the run ended: its bar runs to the end, "unfinished", not "cut".
    @Test func aResponseTheRunsEndStoppedRunsToTheEnd() throws {
        var outcome = self.outcome("stopped", passed: false)
        var stopped = RunEvidence.Request(at: 0.3, path: "/files/video.bin", status: 200, bodyBytesSent: 2_097_152)
        stopped.ended = 0.32
        stopped.undelivered = 1_954_508
        stopped.stoppedByRunEnd = true
        outcome.evidence.requests = [stopped]
        let html = try self.page([.ran(outcome)])
        #expect(html.contains(#"<g class="mark request broken" data-at="0.3" data-ended="2">"#), "\(html)")
        #expect(
            html.contains("(142,644 reached the client), the rest still on its way when the run ended")
                || html.contains("(142644 reached the client), the rest still on its way when the run ended"), "\(html)"
        )
    }

    /// A page load of many assets: rows are packed (no labels; each bar's title says it all), and
    /// there are never more rows than the limit.
    @Test func manyRequestsArePackedIntoRows() throws {
        var outcome = self.outcome("many", passed: true)
        outcome.evidence.requests = (0..<300).map { n in
            var request = RunEvidence.Request(
                at: Double(n % 30) * 0.05, path: "/asset/\(n)", status: 200, bodyBytesSent: 1000)
            request.ended = Double(n % 30) * 0.05 + 0.4
            return request
        }
        let html = try self.page([.ran(outcome)])
        #expect(!html.contains(#"class="request-label""#))
        #expect(html.contains(">requests (300, packed)</text>"))
        #expect(html.components(separatedBy: #"<g class="mark request""#).count - 1 == 300)
        let tops = Set(
            html.components(separatedBy: #"<g class="mark request""#).dropFirst().compactMap { part -> String? in
                guard let range = part.range(of: #" y=""#) else { return nil }
                return String(part[range.upperBound...].prefix { $0 != "\"" })
            })
        #expect(tops.count <= HTMLReport.maxRequestRows, "\(tops.count) rows")
    }

    @Test func whatTheClientPrintsIsEscaped() throws {
        let html = try self.page([.ran(self.outcome("a", passed: false, line: "<script>alert('x')</script>"))])
        #expect(!html.contains("<script>alert"))
        #expect(html.contains("&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt;"))
        #expect(html.contains("asked for &lt;all&gt; &amp; &quot;more&quot;"))
        // The page's own script is the only one.
        #expect(html.components(separatedBy: "<script>").count == 2)
    }

    /// A report made by hand may hold any number: times near the largest double once kept the
    /// axis loop going forever (each tick added nothing). It is drawn, bounded, at once.
    @Test func timesNearTheLargestDoubleAreDrawnAndTheRendererEnds() throws {
        let huge =
            #"{"format": 2, "passed": false, "seconds": 1.7e308, "scenarios": [{"name": "x", "file": "x.yaml", "#
            + #""profile": "lte", "verdict": "failed", "seconds": 1.7e308, "deadline": 1e308, "#
            + #""requests": [{"at": 1e308, "method": "GET", "path": "/", "bodyBytes": 1, "completed": false, "ended": 1.7e308}], "#
            + #""delivered": [[0, 0], [1e308, 5]], "link": [[0, 1000, 10, 0], [1e308, null, 1e308, 0]], "#
            + #""output": [{"at": 1.7e308, "stderr": true, "text": "late"}], "checks": [{"name": "completes", "passed": false, "#
            + #""evidence": "e", "marks": [1e308]}]}]}"#
        let html = try HTMLReport.render(json: Data(huge.utf8), source: "hand.json")
        #expect(html.contains("<svg class=\"timeline\""))
        #expect(html.components(separatedBy: #"<line class="tick""#).count - 1 <= 100)
    }

    @Test func aReportOfAnotherVersionOrATruncatedOneIsRefusedClearly() {
        func failure(_ text: String) -> String {
            do {
                _ = try HTMLReport.render(json: Data(text.utf8), source: "old.json")
                return ""
            } catch {
                return error.description
            }
        }
        #expect(
            failure(#"{"format": 1, "passed": true, "scenarios": []}"#).contains(
                "old.json: a report of format 1; this netcond draws format 2"))
        #expect(failure(#"{"passed": true, "scenarios": []}"#).contains("no format (an older netcond)"))
        #expect(
            failure(#"{"format": 2, "scenarios": [{"name": "#).hasPrefix("old.json: not JSON (it may be truncated)"))
        #expect(failure(#"[1, 2]"#).contains("not a netcond JSON report"))
    }

    /// The time axis's first label, `0s`, is centred on the plot's left edge: its group's clip
    /// leaves room for it either side of the plot (clipped there, it once read `s`).
    @Test func theAxisLabelAtZeroIsDrawnWhole() throws {
        let html = try self.page([.ran(self.outcome("a", passed: true))])
        #expect(html.contains(#"<text class="axis" x="250.0" y="#) && html.contains(">0s</text>"))
        #expect(html.contains(#"<g class="axis-ticks" clip-path="url(#axis-clip-0)">"#))
        let clip = try #require(html.range(of: #"<clipPath id="axis-clip-0"><rect x=""#))
        let left = try #require(Double(html[clip.upperBound...].prefix { $0 != "\"" }))
        // `0s` at 11 px is about 13 px wide: half of it left of 250.
        #expect(left <= 250 - 13)
        // The plot itself is still clipped at its edge.
        #expect(html.contains(#"<clipPath id="clip-0"><rect x="249""#))
    }

    @Test func aHundredScenariosStayWellUnderFiveMegabytes() throws {
        let results = (0..<100).map { ScenarioSuite.Result.ran(self.outcome("s\($0)", passed: $0 % 3 != 0)) }
        let html = try self.page(results)
        #expect(html.utf8.count < 5_000_000)
    }
}
