import Foundation
import NetcondCore

@testable import NetcondScenario

/// A run with something in every field of the JSON report: each optional a request may carry, a
/// link that moves (and one unlimited), every kind of link event, output on both streams, failed
/// attempts, checks with details, caveats and marks, text that needs escaping; and a scenario
/// that could not run.
enum ReportFixture {
    static func results() -> [ScenarioSuite.Result] {
        [.ran(Self.outcome()), .error(Self.scenario("broken \"one\""), "cannot start: port 80 in use \u{1B}[31m")]
    }

    static func scenario(_ name: String) -> Scenario {
        Scenario(
            name: name, description: "every field", file: "Scenarios/sub dir/\(name).yaml",
            profile: Profile(name: "subway"), timeline: [], origin: OriginContent(),
            client: ClientSpec(command: ["sh", "-c", "curl -o \"$NETCOND_OUTPUT\" /x"]), checks: [])
    }

    static func outcome() -> ScenarioOutcome {
        var first = RunEvidence.Request(
            at: 0.1234, method: "POST", path: "/api/orders", idempotencyKey: "k-1", status: 503, retryAfter: "2",
            bodyBytesSent: 70, completed: true, ended: 0.25)
        first.responded = 0.2
        var cut = RunEvidence.Request(
            at: 1.5, path: "/files/big.bin", range: "bytes=300-", status: 206, bodyBytesSent: 2_097_152)
        cut.ended = 1.95
        cut.undelivered = 1_000_000
        cut.linkCut = .reset
        var late = RunEvidence.Request(at: 2.25, path: "/files/video.bin", status: 200, bodyBytesSent: 5_000)
        late.ended = 2.3
        late.received = 2.75
        var stopped = RunEvidence.Request(
            at: 3, path: "/files/long.bin", status: nil, bodyBytesSent: 9_999, completed: false)
        stopped.undelivered = 9_000
        stopped.stoppedByRunEnd = true
        var evidence = RunEvidence(
            exit: .exited(8), timedOut: true, deadline: .milliseconds(4_500), duration: 4.56789,
            requests: [first, cut, late, stopped], workingDirectory: "/nonexistent", origin: OriginContent())
        evidence.failedConnects = [
            RunEvidence.FailedConnect(at: 1.0, host: "origin.netcond.test", port: 443, outcome: .timedOut),
            RunEvidence.FailedConnect(at: 1.1, host: "10.0.0.1", port: 80, outcome: .refused),
        ]
        evidence.lines = [
            RunEvidence.OutputLine(at: 0.5, stderr: false, text: "fetching /x … <b>&</b>"),
            RunEvidence.OutputLine(at: 4.4, stderr: true, text: "curl: (18) transfer closed \"early\" \\ ✗"),
        ]
        evidence.sender = "cubic"
        evidence.linkEvents = Self.linkEvents()
        var resumes = CheckResult(name: "resumes", passed: false, evidence: "asked for <all> & \"more\"")
        resumes.marks = [0.2, 1.5, 1e-3]
        resumes.details = ["detail one", "détail two / with slash"]
        resumes.caveat = "not exact through the proxy"
        var outcome = ScenarioOutcome(
            scenario: Self.scenario("every-field"), seed: UInt64.max, command: ["curl", "-o", "out file"],
            evidence: evidence,
            results: [CheckResult(name: "completes", passed: true, evidence: "exit 0 after 2.00s"), resumes],
            applied: [(at: 0.3, what: "cut (reset)"), (at: 2.0004, what: "switch to edge")], startup: 0.0456,
            linkSummary: "subway: 4.6 s", clientOutput: ClientOutput(tail: "line 1\nline 2\n", stderrTail: "err"))
        let fast = LinkMoment(rate: .mbit(2), delay: .milliseconds(40), loss: 0)
        let open = LinkMoment(rate: nil, delay: .microseconds(12_345), loss: 0.0000123)
        outcome.delivered = [
            DeliverySample(at: 0, bytes: 0, link: fast), DeliverySample(at: 0.1, bytes: 1_500, link: fast),
            DeliverySample(at: 0.2, bytes: 3_000, link: open), DeliverySample(at: 4.568, bytes: 1_097_152, link: open),
        ]
        return outcome
    }

    static func linkEvents() -> [RunEvidence.LinkEvent] {
        [
            RunEvidence.LinkEvent(at: 0, kind: .link, detail: "link: subway"),
            RunEvidence.LinkEvent(at: 0.25, kind: .link, detail: "link: subway, outage (blackhole)"),
            RunEvidence.LinkEvent(at: 1.2, kind: .fault, detail: "fault 503 on GET /files/big.bin"),
            RunEvidence.LinkEvent(
                at: 1.3, kind: .captive, detail: "portal answered 200: GET http://origin.netcond.test/files/a.json"),
            RunEvidence.LinkEvent(at: 2.5, kind: .link, detail: "link: subway, stall (down)"),
        ]
    }
}
