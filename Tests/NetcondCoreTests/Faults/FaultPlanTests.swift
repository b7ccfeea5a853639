import Testing

@testable import NetcondCore

/// Which request a fault hits: matching, first N, fractions from the seed, time windows, order.
@Suite struct FaultPlanTests {
    let get = FaultRequest(method: "GET", host: "origin.netcond.test", path: "/files/big.bin?x=1")
    let post = FaultRequest(method: "POST", host: "api.example.com", path: "/orders")

    @Test func globsMatchHostPathAndMethod() {
        #expect(RequestMatch().matches(self.get))
        #expect(RequestMatch(host: "*.netcond.test").matches(self.get))
        #expect(RequestMatch(host: "ORIGIN.netcond.test").matches(self.get))
        #expect(!RequestMatch(host: "*.example.com").matches(self.get))
        #expect(RequestMatch(path: "/files/*").matches(self.get))
        #expect(RequestMatch(path: "/files/big.bin").matches(self.get))  // the query is not part of the path
        #expect(!RequestMatch(path: "/files").matches(self.get))
        #expect(RequestMatch(path: "*.bin").matches(self.get))
        #expect(RequestMatch(method: "POST").matches(self.post))
        #expect(!RequestMatch(method: "POST").matches(self.get))
        #expect(Glob.matches("a*b*c", "axxbyyc") && !Glob.matches("a*b*c", "axxbyy") && Glob.matches("**", ""))
    }

    @Test func firstNThenThrough() {
        var plan = FaultPlan(
            faults: [HTTPFault(action: .status(503, retryAfter: nil), select: FaultSelection(first: 2))], seed: 1)
        let hits = (0..<4).map { _ in plan.decide(self.get, at: .zero) != nil }
        #expect(hits == [true, true, false, false])
        #expect(plan.rules[0].matched == 4 && plan.rules[0].applied == 2)
    }

    /// A fault numbers the requests it sees: those its match selects that no fault before it took.
    @Test func requestNumbersCountWhatTheFaultSees() {
        var plan = FaultPlan(
            faults: [
                HTTPFault(file: "big.bin", action: .status(503, retryAfter: nil), select: FaultSelection(first: 2)),
                HTTPFault(
                    file: "big.bin", action: .cut(after: ByteCount(bytes: 1), end: .fin),
                    select: FaultSelection(requests: [1, 3])),
            ], seed: 1)
        let head = FaultRequest(method: "HEAD", host: "origin.netcond.test", path: "/files/big.bin")
        let actions = (0..<6).map { index in plan.decide(index == 2 ? head : self.get, at: .zero)?.fault.action }
        let cut = FaultAction.cut(after: ByteCount(bytes: 1), end: .fin)
        // Two 503s; the HEAD is no GET of the file; then the cut's requests 1 and 3 of those it sees.
        #expect(actions == [.status(503, retryAfter: nil), .status(503, retryAfter: nil), nil, cut, nil, cut])
        #expect(plan.rules.map(\.matched) == [5, 3] && plan.rules.map(\.applied) == [2, 2])
    }

    @Test func aTimeWindowSinceTheStart() {
        var plan = FaultPlan(
            faults: [HTTPFault(action: .dropResponse, select: FaultSelection(from: .seconds(10), until: .seconds(20)))],
            seed: 1
        )
        let hits = [Span.seconds(9), .seconds(10), .milliseconds(19_999), .seconds(20)].map {
            plan.decide(self.get, at: $0) != nil
        }
        #expect(hits == [false, true, true, false])
    }

    @Test func aFractionIsSeededAndNearItsRate() {
        func pattern(seed: UInt64) -> [Bool] {
            var plan = FaultPlan(
                faults: [
                    HTTPFault(action: .status(500, retryAfter: nil), select: FaultSelection(fraction: Probability(0.2)))
                ], seed: seed)
            return (0..<1000).map { _ in plan.decide(self.get, at: .zero) != nil }
        }
        #expect(pattern(seed: 7) == pattern(seed: 7))
        #expect(pattern(seed: 7) != pattern(seed: 8))
        let rate = Double(pattern(seed: 7).filter { $0 }.count) / 1000
        #expect(abs(rate - 0.2) < 0.05)
    }

    @Test func theFirstSelectedRuleWinsAndLiveRulesComeAfter() {
        var plan = FaultPlan(faults: [HTTPFault(match: RequestMatch(method: "POST"), action: .dropResponse)], seed: 1)
        let id = plan.add(HTTPFault(action: .status(503, retryAfter: .seconds(1))))
        let forPost = plan.decide(self.post, at: .zero)
        let forGet = plan.decide(self.get, at: .zero)
        #expect(forPost?.fault.action == .dropResponse)
        #expect(forGet?.id == id)
        let removed = plan.remove(id: id)
        let removedAgain = plan.remove(id: id)
        #expect(removed && !removedAgain)
        let none = plan.decide(self.get, at: .zero)
        #expect(none == nil)
        plan.replace(with: [HTTPFault(action: .slowClose(.seconds(1)))])
        #expect(plan.rules.map(\.id) == [id + 1])
    }

    @Test func faultsAreRemovedByName() {
        var plan = FaultPlan(faults: [HTTPFault(name: "flaky", action: .status(503, retryAfter: nil))], seed: 1)
        plan.add(HTTPFault(name: "flaky", action: .dropResponse))
        let kept = plan.add(HTTPFault(name: "slow", action: .delay(.seconds(1))))
        #expect(plan.remove(named: "flaky") == 2)
        #expect(plan.remove(named: "flaky") == 0)
        #expect(plan.rules.map(\.id) == [kept])
    }
}
