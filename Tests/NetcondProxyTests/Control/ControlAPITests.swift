import Foundation
import NetcondCore
import Testing

@testable import NetcondProxy

/// The control API's routing: what each request asks for, and a clear rejection for every bad one.
@Suite struct ControlAPITests {
    func route(_ method: String, _ target: String, _ body: String = "") -> Result<
        ControlAPI.Route, ControlAPI.Rejection
    > {
        ControlAPI.route(method: method, target: target, body: Array(body.utf8))
    }

    func rejection(_ result: Result<ControlAPI.Route, ControlAPI.Rejection>) -> ControlAPI.Rejection? {
        if case .failure(let rejection) = result { return rejection }
        return nil
    }

    @Test func statusInOriginAndAbsoluteFormAndWithAQuery() {
        #expect(self.route("GET", "/status") == .success(.status))
        #expect(self.route("GET", "http://127.0.0.1:8081/status") == .success(.status))
        #expect(self.route("GET", "/status?pretty=1") == .success(.status))
    }

    @Test func outagesAndStallsStartAndEnd() {
        for behaviour in OutageBehaviour.allCases {
            #expect(
                self.route("POST", "/outage", #"{"behaviour": "\#(behaviour.rawValue)"}"#)
                    == .success(.command(.outage(behaviour))))
        }
        #expect(self.route("POST", "/outage", #"{"behavior": "refuse"}"#) == .success(.command(.outage(.refuse))))
        #expect(self.route("DELETE", "/outage") == .success(.command(.outage(nil))))
        for direction in StallDirection.allCases {
            #expect(
                self.route("POST", "/stall", #"{"direction": "\#(direction.rawValue)"}"#)
                    == .success(.command(.stall(direction))))
        }
        #expect(self.route("DELETE", "/stall") == .success(.command(.stall(nil))))
    }

    @Test func aKeyGivenTwiceIsRefusedNotSilentlyResolved() {
        let twice = self.rejection(self.route("POST", "/profile", #"{"name": "edge", "name": "3g"}"#))
        #expect(twice?.message == "the key 'name' is given twice; allowed: each key once")
        #expect(
            self.rejection(self.route("POST", "/outage", #"{"behaviour": "refuse",  "behaviour" : "blackhole"}"#))
                != nil)
        // The same key in different objects, and a value that looks like a key, are fine.
        #expect(
            JSONDuplicateKeys.first(in: Array(#"{"a": {"b": 1}, "c": {"b": 2}, "d": ["e", "e"], "f": "a"}"#.utf8))
                == nil)
        #expect(JSONDuplicateKeys.first(in: Array(#"{"a": "x\"y", "b": {"a": 1, "a": 2}}"#.utf8)) == "a")
        #expect(self.route("POST", "/outage", #"{"behaviour": "refuse"}"#) == .success(.command(.outage(.refuse))))
    }

    @Test func aCutResetsByDefaultOrClosesWhenAsked() {
        #expect(self.route("POST", "/cut") == .success(.command(.cut(.reset))))
        #expect(self.route("POST", "/cut", "{}") == .success(.command(.cut(.reset))))
        #expect(self.route("POST", "/cut", #"{"mode": "close"}"#) == .success(.command(.cut(.close))))
        #expect(
            self.rejection(self.route("POST", "/cut", #"{"mode": "fin"}"#))?.message
                == "unknown mode 'fin'; allowed: reset, close")
        #expect(self.rejection(self.route("POST", "/cut", "reset"))?.status == 400)
        #expect(self.rejection(self.route("GET", "/cut"))?.message == "GET /cut is not supported; allowed: POST /cut")
    }

    @Test func aHandoverTakesAProfileAndAGap() throws {
        let lte = try ProfileCatalog.resolve("lte")
        #expect(
            self.route("POST", "/handover", #"{"name": "lte", "gap": "2s"}"#)
                == .success(.command(.handover(lte, gap: .seconds(2)))))
        #expect(self.route("POST", "/handover", #"{"name": "lte"}"#) == .success(.command(.handover(lte, gap: .zero))))
        #expect(
            self.rejection(self.route("POST", "/handover", #"{"name": "lte", "gap": "soon"}"#))?.message.hasPrefix(
                "'gap' must be a duration") == true)
        #expect(self.rejection(self.route("POST", "/handover", #"{"gap": "2s"}"#))?.status == 400)
        #expect(self.rejection(self.route("GET", "/handover"))?.status == 405)
    }

    @Test func profileByNameAndByText() throws {
        let builtin = try ProfileCatalog.resolve("3g")
        #expect(self.route("POST", "/profile", #"{"name": "3g"}"#) == .success(.command(.switchProfile(builtin))))
        let yaml = "name: slow\\nextends: edge\\ndown: {latency: 900ms}\\n"
        guard
            case .success(.command(.switchProfile(let profile))) = self.route(
                "POST", "/profile", #"{"yaml": "\#(yaml)"}"#)
        else {
            Issue.record("the YAML was not accepted")
            return
        }
        #expect(profile.name == "slow")
        #expect(profile.down.latency == .milliseconds(900))
        #expect(profile.up.bandwidth == (try ProfileCatalog.resolve("edge")).up.bandwidth)
    }

    @Test func aResolvedProfileSentAsTextComesBackEqual() throws {
        // What `netcond ctl profile FILE` sends: the resolved profile's YAML.
        let subway = try ProfileCatalog.resolve("subway")
        let body = try JSONSerialization.data(withJSONObject: ["yaml": subway.yamlDescription, "file": "subway.yaml"])
        #expect(
            ControlAPI.route(method: "POST", target: "/profile", body: Array(body))
                == .success(.command(.switchProfile(subway))))
    }

    @Test(
        arguments: [
            ("GET", "/nope", "", 404, "no such endpoint /nope"),
            ("POST", "/status", "", 405, "allowed: GET /status"),
            ("GET", "/outage", "", 405, "allowed: POST or DELETE /outage"),
            ("PUT", "/stall", "", 405, "allowed: POST or DELETE /stall"),
            ("GET", "/profile", "", 405, "allowed: POST /profile"),
            ("POST", "/outage", "", 400, "expected a JSON object"),
            ("POST", "/outage", "blackhole", 400, "expected a JSON object"),
            ("POST", "/outage", "[1, 2]", 400, "expected a JSON object"),
            (
                "POST", "/outage", #"{"behaviour": "explode"}"#, 400,
                "unknown behaviour 'explode'; allowed: blackhole, refuse, reset"
            ),
            ("POST", "/outage", #"{"behaviour": 3}"#, 400, "'behaviour' is missing or not a string"),
            ("POST", "/outage", #"{"kind": "refuse"}"#, 400, "'behaviour' is missing"),
            (
                "POST", "/stall", #"{"direction": "sideways"}"#, 400,
                "unknown direction 'sideways'; allowed: up, down, both"
            ),
            ("POST", "/profile", #"{"name": "4g"}"#, 400, "4g"),
            ("POST", "/profile", #"{"name": "Profiles/edge.yaml"}"#, 400, "is a path; paths are not accepted over the"),
            ("POST", "/profile", #"{"nmae": "3g"}"#, 400, #"unknown key 'nmae'; allowed: {"name": "3g"}"#),
            ("POST", "/profile", #"{"name": "3g", "yaml": "extends: edge"}"#, 400, "'name' goes alone"),
            ("POST", "/profile", #"{"yaml": "down: {bandwidth: -3kbit}"}"#, 400, "profile.yaml:1"),
            ("POST", "/profile", #"{"yaml": "down: {bandwith: 3kbit}", "file": "mine.yaml"}"#, 400, "mine.yaml:1"),
        ] as [(String, String, String, Int, String)])
    func badRequestsAreRejectedWithAReason(method: String, target: String, body: String, status: Int, reason: String) {
        let rejection = self.rejection(self.route(method, target, body))
        #expect(rejection?.status == status)
        #expect(rejection?.message.contains(reason) == true, "\(rejection?.message ?? "accepted")")
    }

    /// Issue 15: a profile sent to the API names no file; a path in any key that would read one is
    /// refused before anything is read (no file's text, nor whether it exists, comes back).
    @Test(
        arguments: [
            ("extends: /etc/shadow", "extends"),
            ("extends: /etc/passwd", "extends"),
            ("extends: ../../../../../../etc/passwd", "extends"),
            ("extends: no-such-dir/x.yaml", "extends"),
            ("extends: secret.yml", "extends"),
            ("schedule: {phases: [{for: 1s, use: /etc/passwd}]}", "schedule.phases[0].use"),
            ("extends: 3g\nschedule: {phases: [{for: 1s}, {for: 1s, use: ./other.yaml}]}", "schedule.phases[1].use"),
        ] as [(String, String)])
    func aProfileSentToTheAPINamesNoFile(yaml: String, keyPath: String) throws {
        let body = try JSONSerialization.data(withJSONObject: ["yaml": yaml, "file": "/etc/mine.yaml"])
        let rejection = self.rejection(ControlAPI.route(method: "POST", target: "/profile", body: Array(body)))
        #expect(rejection?.status == 400)
        let message = rejection?.message ?? "accepted"
        #expect(message.contains("\(keyPath): '"), "\(message)")
        #expect(message.contains("is a path; paths are not accepted over the control API"), "\(message)")
        #expect(message.contains("`netcond ctl profile FILE` resolves files on its own side"), "\(message)")
        #expect(!message.contains("root:") && !message.contains("no such file"), "\(message)")
    }

    @Test func aProfileSentToTheAPIMayNameBuiltins() {
        let yaml = "name: mine\\nextends: edge\\nschedule: {phases: [{for: 1s, use: 3g}, {for: 1s, use: none}]}"
        let result = self.route("POST", "/profile", #"{"yaml": "\#(yaml)"}"#)
        guard case .success(.command(.switchProfile(let profile))) = result else {
            Issue.record("a profile naming built-ins only was refused")
            return
        }
        #expect(profile.name == "mine" && profile.schedule?.phases.count == 2)
    }

    @Test func faultsAreAddedListedAndRemoved() {
        #expect(self.route("GET", "/faults") == .success(.faults))
        #expect(self.route("GET", "/events") == .success(.events))
        #expect(
            self.route("POST", "/faults", #"{"status": 503, "retry_after": "5s", "first": 2}"#)
                == .success(
                    .command(
                        .addFault(
                            HTTPFault(action: .status(503, retryAfter: .seconds(5)), select: FaultSelection(first: 2))))
                )
        )
        #expect(
            self.route("POST", "/faults", "{drop_response: true, match: {method: POST}}")
                == .success(.command(.addFault(HTTPFault(match: RequestMatch(method: "POST"), action: .dropResponse)))))
        #expect(self.route("DELETE", "/faults/3") == .success(.command(.removeFault(3))))
        #expect(self.route("DELETE", "/faults") == .success(.command(.removeFault(nil))))
        #expect(self.route("DELETE", "/faults/flaky") == .success(.command(.removeFaultsNamed("flaky"))))
        #expect(self.route("DELETE", "/faults/slow%20api") == .success(.command(.removeFaultsNamed("slow api"))))
        let bad = [
            self.route("POST", "/faults", ""),
            self.route("POST", "/faults", #"{"status": 200}"#),
            self.route("POST", "/faults", #"{"explode": true}"#),
            self.route("DELETE", "/faults/0"),
            self.route("GET", "/faults/1"),
            self.route("POST", "/events"),
        ].map { self.rejection($0) }
        #expect(bad.map { $0?.status } == [400, 400, 400, 400, 405, 405])
        #expect(bad[1]?.message.contains("body:1:") == true)
        #expect(bad[2]?.message.contains("first_byte") == true)
    }

    @Test func anOversizedBodyIsRejected() {
        let body = [UInt8](repeating: 0x20, count: ControlAPI.maxBodyBytes + 1)
        #expect(self.rejection(ControlAPI.route(method: "POST", target: "/profile", body: body))?.status == 413)
    }

    @Test func statusJSONUsesSnakeCaseAndRoundTrips() throws {
        let status = ControlStatus(
            profile: "subway", phase: "tunnel", outage: "blackhole", stalled: ["down"], seed: 7, elapsedSeconds: 1.5,
            connectionsTotal: 3, connectionsOpen: 1, bytesUp: 10, bytesDown: 2000, bytesDelivered: 1500,
            segmentsSent: 3, segmentsLost: 1,
            queueDrops: 0, outageDrops: 4, retransmissions: 5, resets: 0, closes: 1, refusedConnections: 2,
            upstreamFailures: 0,
            faults: 1, faultsApplied: 3, captivePortal: "closed",
            timerWakeups: 10, timerLateUs: [20, 60, 900]
        )
        let text = String(decoding: status.json(), as: UTF8.self)
        #expect(text.contains(#""connections_open":1"#))
        #expect(text.contains(#""bytes_delivered":1500"#))
        #expect(text.contains(#""outage":"blackhole""#))
        #expect(text.hasSuffix("\n"))
        #expect(try JSONDecoder().decode(ControlStatus.self, from: Data(status.json())) == status)
        var calm = status
        calm.outage = nil
        #expect(String(decoding: calm.json(), as: UTF8.self).contains(#""outage":null"#))
    }
}

@Suite struct DashboardRouteTests {
    @Test func theRootIsTheDashboardAndOnlyForGET() {
        #expect(ControlAPI.route(method: "GET", target: "/", body: []) == .success(.dashboard))
        #expect(ControlAPI.route(method: "GET", target: "http://127.0.0.1:8081/", body: []) == .success(.dashboard))
        guard case .failure(let rejection) = ControlAPI.route(method: "POST", target: "/", body: []) else {
            Issue.record("POST / was accepted")
            return
        }
        #expect(rejection.status == 405)
        // The page may not be framed, and names no resource beyond the API itself.
        #expect(Dashboard.headers.contains { $0.0 == "X-Frame-Options" && $0.1 == "DENY" })
        #expect(Dashboard.page.contains("\"edge\"") && !Dashboard.page.contains("PROFILES"))
        // SVG's namespace is a name, never fetched.
        let page = Dashboard.page.replacingOccurrences(of: "'http://www.w3.org/2000/svg'", with: "")
        #expect(!page.contains("http://") && !page.contains("https://"))
    }

    @Test func theHistoryIsAGETWithAnOptionalSince() {
        #expect(ControlAPI.route(method: "GET", target: "/history", body: []) == .success(.history(since: nil)))
        #expect(
            ControlAPI.route(method: "GET", target: "/history?since=12.5", body: []) == .success(.history(since: 12.5)))
        for bad in ["/history?since=soon", "/history?since=nan", "/history?until=3", "/history?since"] {
            guard case .failure(let rejection) = ControlAPI.route(method: "GET", target: bad, body: []) else {
                Issue.record("\(bad) was accepted")
                continue
            }
            #expect(rejection.status == 400, "\(bad)")
        }
        guard case .failure(let rejection) = ControlAPI.route(method: "POST", target: "/history", body: []) else {
            Issue.record("POST /history was accepted")
            return
        }
        #expect(rejection.status == 405)
    }
}

/// The history the dashboard draws: each sample the rates of the interval before it, and the
/// moments the link changed found by comparing samples.
@Suite struct ControlHistoryTests {
    func status(
        at t: Double, delivered: Int64 = 0, up: Int64 = 0, lost: Int = 0, retransmissions: Int = 0,
        profile: String = "3g",
        outage: String? = nil, stalled: [String] = [], faultsApplied: Int = 0, queue: [Double] = [3, 40]
    ) -> ControlStatus {
        ControlStatus(
            profile: profile, phase: "", outage: outage, stalled: stalled, seed: 1, elapsedSeconds: t,
            connectionsTotal: 1, connectionsOpen: 1, bytesUp: up, bytesDown: delivered, bytesDelivered: delivered,
            segmentsSent: 0, segmentsLost: lost, queueDrops: 0, outageDrops: 0, retransmissions: retransmissions,
            resets: 0,
            closes: 0, refusedConnections: 0, upstreamFailures: 0, faults: 0, faultsApplied: faultsApplied,
            captivePortal: nil,
            timerWakeups: 0, timerLateUs: [], queueDelayMs: queue)
    }

    @Test func eachSampleIsTheIntervalBeforeItAndTheChangesAreMarked() throws {
        var history = ControlHistory()
        history.add(self.status(at: 0.5))
        history.add(self.status(at: 1.0, delivered: 62_500, up: 1_250, lost: 2, retransmissions: 1))
        history.add(
            self.status(at: 1.5, delivered: 125_000, up: 2_500, lost: 2, retransmissions: 1, outage: "blackhole"))
        history.add(
            self.status(
                at: 2.0, delivered: 125_000, up: 2_500, lost: 4, retransmissions: 1, outage: nil, stalled: ["down"]))
        history.add(
            self.status(
                at: 2.5, delivered: 125_000, up: 2_500, lost: 4, retransmissions: 3, profile: "edge", faultsApplied: 2))
        #expect(history.samples.map(\.t) == [1.0, 1.5, 2.0, 2.5])
        #expect(history.samples.map(\.downKbps) == [1000, 1000, 0, 0], "62,500 bytes in 0.5 s")
        #expect(history.samples.map(\.upKbps) == [20, 20, 0, 0])
        #expect(history.samples.map(\.lostPerSecond) == [4, 0, 4, 0])
        #expect(history.samples.map(\.retransmittedPerSecond) == [2, 0, 0, 4])
        #expect(
            history.samples.map(\.queueDownMs) == [40, 40, 40, 40] && history.samples.map(\.queueUpMs) == [3, 3, 3, 3])
        #expect(
            history.marks.map { "\($0.t) \($0.kind) \($0.detail)" } == [
                "0.5 profile 3g", "1.5 outage blackhole", "2.0 outage-end blackhole", "2.0 stall down",
                "2.5 profile edge", "2.5 stall-end down", "2.5 fault 2 requests hit",
            ])
        let since = try JSONSerialization.jsonObject(with: Data(history.json(since: 1.5))) as? [String: Any]
        #expect((since?["samples"] as? [[String: Any]])?.compactMap { $0["t"] as? Double } == [2.0, 2.5])
        #expect((since?["samples"] as? [[String: Any]])?.first?["down_kbps"] as? Double == 0)
        #expect((since?["marks"] as? [[String: Any]])?.count == 5)
        #expect(since?["interval_seconds"] as? Double == 0.5)
        // An engine that does not say its queue delay: null, not a made-up 0.
        var packet = ControlHistory()
        packet.add(self.status(at: 0.5, queue: []))
        var unsaid = self.status(at: 1.0)
        unsaid.queueDelayMs = nil
        packet.add(unsaid)
        #expect(packet.samples.first?.queueDownMs == nil)
        #expect(String(decoding: packet.json(since: nil), as: UTF8.self).contains(#""queue_down_ms":null"#))
    }

    /// A steady download through a 1 Mbit/s link, a segment lost behind a full queue: the receiver
    /// holds what came after it until the repair (delivered: nothing for half a second, then twice
    /// as much), while the link carried 62,500 bytes every half second. The graph draws the link.
    @Test func theThroughputIsWhatTheLinkCarriedNotAnInOrderReceiversBursts() {
        let delivered: [Int64] = [0, 62_500, 125_000, 125_000, 250_000, 312_500]
        var history = ControlHistory()
        for (step, bytes) in delivered.enumerated() {
            var status = self.status(at: 0.5 * Double(step), delivered: bytes)
            status.linkBytesDown = Int64(step) * 62_500
            history.add(status)
        }
        #expect(history.samples.map(\.downKbps) == [1000, 1000, 1000, 1000, 1000])
        // An engine that does not say what its link carried: what was delivered, bursts and all.
        var delivering = ControlHistory()
        for (step, bytes) in delivered.enumerated() {
            delivering.add(self.status(at: 0.5 * Double(step), delivered: bytes))
        }
        #expect(delivering.samples.map(\.downKbps) == [1000, 1000, 0, 2000, 1000])
    }

    @Test func itKeepsTheLastTenMinutes() {
        var history = ControlHistory()
        for step in 0...(ControlHistory.capacity + 100) {
            history.add(self.status(at: Double(step) * 0.5, outage: step % 200 == 100 ? "refuse" : nil))
        }
        #expect(history.samples.count == ControlHistory.capacity)
        #expect(history.samples.first?.t == 50.5)
        #expect(history.marks.allSatisfy { $0.t >= 50 }, "a mark before the oldest sample goes with it")
        #expect(!history.marks.isEmpty)
    }
}
