import Testing

@testable import NetcondCore
@testable import NetcondOrigin
@testable import NetcondScenario

/// `delivers` on hand-made origin logs: five changes, the network back at +6 s, 5 s allowed.
@Suite struct DeliversCheckTests {
    typealias Request = RunEvidence.Request
    static let five = DeliversCheck(api: "changes", count: 5, within: .seconds(Int64(5)), returnsAt: .seconds(Int64(6)))

    func evidence(_ requests: [Request]) -> RunEvidence {
        RunEvidence(
            exit: .exited(0), timedOut: false, deadline: .seconds(30), duration: 9, requests: requests,
            workingDirectory: "/nonexistent", origin: OriginContent(api: [OriginAPI(name: "changes", method: .post)]))
    }

    func post(_ at: Double, key: String?, _ effect: OriginEffect?, answered: Bool = true) -> Request {
        Request(
            at: at, method: "POST", path: "/api/changes", idempotencyKey: key,
            status: answered ? (effect.map { if case .created = $0 { 201 } else { 200 } } ?? 502) : nil,
            ended: at + 0.1, effect: effect)
    }

    /// Change 1 online, 2…5 after the return; the answer to 3 lost and 3 repeated with its key.
    var queued: [Request] {
        [
            self.post(0.3, key: "change-1", .created(1)), self.post(6.2, key: "change-2", .created(2)),
            self.post(6.3, key: "change-3", .created(3), answered: false),
            self.post(6.8, key: "change-3", .replayed(3)), self.post(6.9, key: "change-4", .created(4)),
            self.post(7.0, key: "change-5", .created(5)),
        ]
    }

    @Test func aQueueFlushedInOrderPasses() {
        let result = Checks.delivers(Self.five, self.evidence(self.queued))
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence
                == "5 of 5 changes arrived at /api/changes, each once and in order, 1 repeat replayed by key; the last at +7.00s, 1.00s after the network came back at +6.00s (5 s allowed)"
        )
        #expect(result.details[2] == "+6.30s created #3, response lost, key 'change-3'")
    }

    @Test func theReturnIsWhenTheLinkCameBackNotBeforeTheTimelinesMoment() {
        // The link came out of its outage 1.5 s after the timeline's moment (a loaded machine):
        // the last change at +10.9 s is 3.4 s after that, inside the 5 s allowed.
        var requests = self.queued
        requests[5] = self.post(10.9, key: "change-5", .created(5))
        var evidence = self.evidence(requests)
        evidence.linkEvents = [
            RunEvidence.LinkEvent(at: 2.0, kind: .link, detail: "link: lte, outage (refuse)"),
            RunEvidence.LinkEvent(at: 7.5, kind: .link, detail: "link: lte"),
        ]
        let result = Checks.delivers(Self.five, evidence)
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence.hasSuffix("the last at +10.90s, 3.40s after the network came back at +7.50s (5 s allowed)"))
        // A link change before the timeline's moment (another event) never moves the return earlier.
        evidence.linkEvents = [RunEvidence.LinkEvent(at: 3.0, kind: .link, detail: "link: tunnel")]
        #expect(Checks.returnMoment(nominal: 6, evidence) == 6)
    }

    @Test func droppedChangesFail() {
        let result = Checks.delivers(Self.five, self.evidence([self.post(0.3, key: "change-1", .created(1))]))
        #expect(!result.passed)
        #expect(result.evidence == "1 of 5 changes arrived at /api/changes: changes 2 3 4 5 never arrived")
    }

    @Test func aChangeCreatedTwiceUnderTwoKeysFails() {
        var requests = self.queued
        requests[3] = self.post(6.8, key: "attempt-9-change-3", .created(4))
        requests[4] = self.post(6.9, key: "change-4", .created(5))
        requests[5] = self.post(7.0, key: "change-5", .created(6))
        let result = Checks.delivers(Self.five, self.evidence(requests))
        #expect(!result.passed)
        #expect(
            result.evidence
                == "5 of 5 changes arrived at /api/changes: change 3 was created 2 times (objects #3, #4, keys 'change-3', 'attempt-9-change-3')"
        )
    }

    @Test func aCallWithoutAKeyIsNoChangeTheCheckCanPlace() {
        var requests = self.queued
        requests[3] = self.post(6.8, key: nil, .created(4))
        let result = Checks.delivers(Self.five, self.evidence(requests))
        #expect(!result.passed)
        #expect(
            result.evidence
                == "5 of 5 changes arrived at /api/changes: object #4 (+6.80s, no Idempotency-Key) is none of changes 1…5"
        )
    }

    @Test func outOfOrderFails() {
        var requests = self.queued
        requests.swapAt(4, 5)
        let result = Checks.delivers(Self.five, self.evidence(requests))
        #expect(!result.passed)
        #expect(
            result.evidence == "5 of 5 changes arrived at /api/changes: out of order: change 4 arrived after change 5")
    }

    @Test func tooLateFails() {
        var requests = self.queued
        requests[5] = self.post(12.5, key: "change-5", .created(5))
        let result = Checks.delivers(Self.five, self.evidence(requests))
        #expect(!result.passed)
        #expect(
            result.evidence
                == "5 of 5 changes arrived at /api/changes: the last arrived 6.50s after the network came back at +6.00s (5 s allowed)"
        )
    }

    @Test func noCallAtAllFails() {
        let result = Checks.delivers(Self.five, self.evidence([]))
        #expect(!result.passed)
        #expect(result.evidence == "no POST to /api/changes reached the origin (5 changes wanted)")
    }

    @Test func aCallTheLinkCutBeforeTheOriginDidAnythingIsNoChange() {
        // The connection cut while the request was on its way: the origin created nothing; the
        // client's repeat, with the key, created it.
        var requests = self.queued
        var cut = self.post(6.1, key: "change-2", nil, answered: false)
        cut.completed = false
        requests.insert(cut, at: 1)
        let result = Checks.delivers(Self.five, self.evidence(requests))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.details[1] == "+6.10s nothing created (no answer), key 'change-2'")
    }

    @Test func theChangeIsTheKeysLastNumber() {
        #expect(Checks.changeNumber("change-3") == 3)
        #expect(Checks.changeNumber("attempt-7-change-12") == 12)
        #expect(Checks.changeNumber("42") == 42)
        #expect(Checks.changeNumber("v2-note") == 2)
        #expect(Checks.changeNumber("none") == nil)
        #expect(Checks.changeNumber("n-12345678901") == nil)
    }

    @Test func theMarksAreTheReturnAndEachCall() {
        #expect(Checks.marks(.delivers(Self.five), self.evidence(self.queued)) == [0.3, 6, 6.2, 6.3, 6.8, 6.9, 7])
        // A client gone before the network came back: no mark past its end.
        let gone = Checks.marks(
            .delivers(Self.five), self.evidence([self.post(0.3, key: "change-1", .created(1))]).ending(at: 5.8))
        #expect(gone == [0.3])
    }
}

extension RunEvidence {
    func ending(at seconds: Double) -> RunEvidence {
        var evidence = self
        evidence.duration = seconds
        return evidence
    }
}
