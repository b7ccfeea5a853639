import Testing

@testable import NetcondCore
@testable import NetcondScenario

/// `overlaps` on hand-made origin logs over a 600 ms round trip: requests sent together pass; ones
/// sent each after the answer of the one before show 1 in flight, however close they come.
@Suite struct OverlapsCheckTests {
    typealias Request = RunEvidence.Request
    static let page = OverlapsCheck(requests: "/files/*", minInFlight: 4, minRequests: 8)

    func evidence(_ requests: [Request], roundTrip: Double = 0.6) -> RunEvidence {
        var evidence = RunEvidence(
            exit: .exited(0), timedOut: false, deadline: .seconds(60), duration: 12, requests: requests,
            workingDirectory: "/nonexistent", origin: OriginContent())
        evidence.linkRoundTrip = roundTrip
        return evidence
    }

    func get(_ index: Int, at: Double, for seconds: Double = 0.05) -> Request {
        Request(at: at, path: "/files/a\(index).jpg", status: 200, bodyBytesSent: 20_000, ended: at + seconds)
    }

    @Test func eightRequestsSentTogetherAreEightInFlight() {
        let requests = (0..<8).map { self.get($0, at: 0.9 + Double($0) * 0.004) }
        let result = Checks.overlaps(Self.page, self.evidence(requests))
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence
                == "8 requests of /files/*: up to 8 in flight at once (4 wanted); 0.68s from the first's arrival to the last's answer and a round trip, one after another at least 5.20s (each its own time at the origin and the link's 600 ms round trip)"
        )
    }

    @Test func requestsSentEachAfterTheAnswerBeforeAreOneInFlight() {
        // Each arrives a round trip after the one before ended, the least a network allows.
        var at = 0.9
        var requests: [Request] = []
        for index in 0..<8 {
            requests.append(self.get(index, at: at))
            at += 0.05 + 0.6
        }
        let result = Checks.overlaps(Self.page, self.evidence(requests))
        #expect(!result.passed)
        #expect(
            result.evidence.hasPrefix(
                "8 requests of /files/*: at most 1 in flight at once (4 wanted), each sent only once the one before had been answered;"
            ), "\(result.evidence)")
        // Its end stamped 120 ms late (a loaded machine): still one at a time.
        let late = requests.enumerated().map { index, request in
            var request = request
            request.ended = request.ended.map { $0 + 0.12 }
            return request
        }
        #expect(Checks.overlaps(Self.page, self.evidence(late)).evidence.contains("at most 1 in flight"))
    }

    @Test func twoAtATimeIsTwo() {
        var requests: [Request] = []
        for pair in 0..<4 {
            let at = 0.9 + Double(pair) * 0.7
            requests += [self.get(2 * pair, at: at), self.get(2 * pair + 1, at: at + 0.01)]
        }
        let result = Checks.overlaps(Self.page, self.evidence(requests))
        #expect(!result.passed)
        #expect(result.evidence.contains("at most 2 in flight at once (4 wanted), the rest waited for answers"))
    }

    @Test func noRequestAtAllFails() {
        let result = Checks.overlaps(Self.page, self.evidence([]))
        #expect(!result.passed)
        #expect(result.evidence == "no request of /files/* reached the origin")
    }

    @Test func tooFewRequestsFailEvenTogether() {
        let requests = (0..<4).map { self.get($0, at: 0.9) }
        let result = Checks.overlaps(Self.page, self.evidence(requests))
        #expect(!result.passed)
        #expect(
            result.evidence == "4 requests of /files/*, only 4 different (min_requests: 8); up to 4 in flight at once")
    }

    @Test func theSameResourceAskedForTwiceAtOnceIsOneInFlight() {
        // Eight different images one after another, and one of them asked for four times at once:
        // no page loaded in parallel.
        var requests: [Request] = []
        var at = 0.9
        for index in 0..<8 {
            requests.append(self.get(index, at: at))
            at += 0.65
        }
        requests += (0..<3).map { _ in self.get(0, at: 0.9) }
        let result = Checks.overlaps(Self.page, self.evidence(requests.sorted { $0.at < $1.at }))
        #expect(!result.passed)
        #expect(result.evidence.hasPrefix("11 requests of /files/*: at most 1 in flight at once"), "\(result.evidence)")
    }

    @Test func aRequestCutByTheLinkOrNeverAnsweredIsInFlightUntilItsEnd() {
        // One never answered (no end: in flight to the run's end), one cut by the link; the other
        // six come one after another, each inside the silent one's window.
        var silent = self.get(0, at: 0.9)
        silent.status = nil
        silent.ended = nil
        silent.completed = false
        var cut = self.get(1, at: 0.92, for: 2)
        cut.linkCut = .reset
        cut.undelivered = 10_000
        var requests = [silent, cut]
        var at = 1.0
        for index in 2..<8 {
            requests.append(self.get(index, at: at))
            at += 0.65
        }
        let result = Checks.overlaps(
            OverlapsCheck(requests: "/files/*", minInFlight: 3, minRequests: 8), self.evidence(requests))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.evidence.contains("up to 3 in flight at once"))
        #expect(result.details[0] == "+0.90s GET /files/a0.jpg → no answer")
    }

    @Test func onlyTheMatchingHostCounts() {
        var requests = (0..<8).map { self.get($0, at: 0.9) }
        for index in 0..<4 { requests[index].host = "static.netcond.test" }
        var check = Self.page
        check.host = "static.netcond.test"
        check.minRequests = 4
        let result = Checks.overlaps(check, self.evidence(requests))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.evidence.hasPrefix("4 requests of /files/* on static.netcond.test: up to 4 in flight"))
    }

    @Test func theLeastRoundTripIsTheQuickestProfilesAndJitterOnlyAdds() {
        let slow = Profile(
            name: "s", up: LinkDirection(latency: .milliseconds(300), jitter: .milliseconds(40)),
            down: LinkDirection(latency: .milliseconds(300)))
        let quick = Profile(
            name: "q", up: LinkDirection(latency: .milliseconds(20)), down: LinkDirection(latency: .milliseconds(30)))
        var scenario = Scenario(
            name: "s", description: "", file: "s.yaml", profile: slow, timeline: [], origin: OriginContent(),
            client: ClientSpec(), checks: [])
        #expect(scenario.leastRoundTrip == 0.6)
        scenario.timeline = [ScenarioEvent(trigger: .at(.seconds(Int64(5))), action: .switchProfile(quick))]
        #expect(scenario.leastRoundTrip == 0.05)
    }

    @Test func theMarksAreEachRequestsArrivalAndEnd() {
        let requests = [self.get(0, at: 0.9), self.get(1, at: 1.6)]
        #expect(Checks.marks(.overlaps(Self.page), self.evidence(requests)) == [0.9, 0.95, 1.6, 1.65])
    }

    @Test func oneResourceAskedUnderAnotherCaseOrItsDefaultPortIsNotASecond() {
        #expect(Checks.resourceKey(host: "API.netcond.test:80", path: "/a") == "api.netcond.test/a")
        #expect(Checks.resourceKey(host: "api.netcond.test:443", path: "/a") == "api.netcond.test/a")
        #expect(Checks.resourceKey(host: "api.netcond.test:8080", path: "/a") == "api.netcond.test:8080/a")
        // Two "different" hosts that are one name: one resource, one in flight.
        var requests = [self.get(0, at: 0.9), self.get(0, at: 0.9)]
        requests[0].host = "Origin.netcond.test"
        requests[1].host = "origin.netcond.test:80"
        var check = Self.page
        check.minRequests = 1
        check.minInFlight = 2
        let result = Checks.overlaps(check, self.evidence(requests))
        #expect(!result.passed, "\(result.evidence)")
    }
}
