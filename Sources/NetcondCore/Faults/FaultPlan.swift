/// The faults in force at one end (the proxy or the origin) and the decision, per request, of
/// which one hits it: the configured faults first, then those added live, in order; the first
/// that matches and is selected wins. Pure and deterministic: time comes in, fractions draw from
/// the run's seed.
public struct FaultPlan: Sendable {
    public struct Rule: Sendable, Equatable {
        public var id: Int
        public var fault: HTTPFault
        /// Requests it saw: matched inside its time window, not taken by an earlier fault (whether
        /// or not `first`, `requests` or `fraction` picked them). The last one's number.
        public var matched: Int
        /// Requests it hit.
        public var applied: Int
        /// The route whose requests alone it sees (a route's `faults:`); nil: every request.
        public var route: Int? = nil
    }

    /// A decision: the rule that hit, and the fault to apply.
    public struct Hit: Sendable, Equatable {
        public var id: Int
        public var fault: HTTPFault
    }

    public private(set) var rules: [Rule] = []
    private var nextID = 1
    private var random: SeededRandom

    /// `routes`: their faults come first, each seeing only its route's requests (a destination's
    /// own fault is nearer the request than the profile's, which sees every request).
    public init(faults: [HTTPFault] = [], routes: [Route] = [], seed: UInt64) {
        self.random = SeededRandom(seed: seed ^ 0xFA17_FA17_FA17_FA17)
        self.addAll(faults, routes: routes)
    }

    /// A profile's faults and its routes'.
    public init(profile: Profile, seed: UInt64) {
        self.init(faults: profile.faults, routes: profile.routes, seed: seed)
    }

    private mutating func addAll(_ faults: [HTTPFault], routes: [Route]) {
        for (index, route) in routes.enumerated() {
            for fault in route.profile.faults { self.add(fault, route: index) }
        }
        for fault in faults { self.add(fault) }
    }

    public var isEmpty: Bool { self.rules.isEmpty }

    /// Adds a fault after the others; returns its id.
    @discardableResult
    public mutating func add(_ fault: HTTPFault, route: Int? = nil) -> Int {
        let id = self.nextID
        self.nextID += 1
        self.rules.append(Rule(id: id, fault: fault, matched: 0, applied: 0, route: route))
        return id
    }

    /// Removes one fault; false when there is none with that id.
    public mutating func remove(id: Int) -> Bool {
        guard let index = self.rules.firstIndex(where: { $0.id == id }) else { return false }
        self.rules.remove(at: index)
        return true
    }

    /// Removes every fault with this name; returns how many.
    @discardableResult
    public mutating func remove(named name: String) -> Int {
        let before = self.rules.count
        self.rules.removeAll { $0.fault.name == name }
        return before - self.rules.count
    }

    public mutating func removeAll() {
        self.rules.removeAll()
    }

    /// Replaces the faults (a profile switch): counts start over, ids go on.
    public mutating func replace(with faults: [HTTPFault], routes: [Route] = []) {
        self.rules.removeAll()
        self.addAll(faults, routes: routes)
    }

    /// The fault that hits `request` at `elapsed` since the run started, if any; counts it.
    public mutating func decide(_ request: FaultRequest, at elapsed: Span) -> Hit? {
        for index in self.rules.indices {
            let fault = self.rules[index].fault
            if let route = self.rules[index].route, route != request.route { continue }
            guard fault.match.matches(request) else { continue }
            let select = fault.select
            if let from = select.from, elapsed < from { continue }
            if let until = select.until, elapsed >= until { continue }
            self.rules[index].matched += 1
            if let first = select.first, self.rules[index].applied >= first { continue }
            if let numbers = select.requests, !numbers.contains(self.rules[index].matched) { continue }
            if let fraction = select.fraction, !self.random.chance(fraction.value) { continue }
            self.rules[index].applied += 1
            return Hit(id: self.rules[index].id, fault: fault)
        }
        return nil
    }
}
