/// How conditions that change (``ConditionTimeline``: schedule phases, stalls, live changes)
/// reach the stream engine's link.
///
/// Nothing already accepted is lost by a change: queued and in-flight segments keep their place
/// and are served under the new conditions. A `blackhole` drops what is sent while it lasts (TCP
/// repairs it by timeout, with backoff, once the link is back); `refuse` and `reset` answer new
/// connections with a refusal one round trip after the SYN and let open ones carry on (the far
/// end is reachable but turns connections away); only a `reset` outage discards connections, when
/// it begins, and each is counted and reported.
extension LinkModel {
    // MARK: - Live control

    /// Replaces the profile from `now` on: its conditions, its schedule (from its first phase) and
    /// its stalls. Connections stay open; new ones use its `tcp`.
    public func switchProfile(to profile: Profile, at now: Instant) {
        self.catchUp(to: now)
        self.profile = profile
        self.timeline.switchProfile(to: profile, at: self.now)
        // The routes first: whether the link may be bypassed depends on them.
        self.replaceRoutes(with: profile.routes)
        self.links.switchRadio(to: profile.radio, at: self.now)
        self.refresh()
        self.scheduleTimelineTick()
    }

    /// Starts (or, with nil, ends) an outage from `now`, whatever the schedule says.
    public func setOutage(_ outage: OutageBehaviour?, at now: Instant) {
        self.catchUp(to: now)
        self.timeline.setOutage(outage, at: self.now)
        self.refresh()
    }

    /// Stalls a direction (or, with nil, ends the live stall) from `now`.
    public func setStall(_ stall: StallDirection?, at now: Instant) {
        self.catchUp(to: now)
        self.timeline.setStall(stall, at: self.now)
        self.refresh()
    }

    /// Cuts every connection open now, once (the link itself stays up: new connections go through).
    /// What was still on the link is dropped. Returns how many were cut.
    @discardableResult
    public func cutConnections(_ mode: CutMode, at now: Instant) -> Int {
        self.catchUp(to: now)
        let count = self.flows.count
        self.cutAllConnections(mode)
        return count
    }

    /// What the link is doing now.
    public var state: LinkState {
        LinkState(
            phase: self.timeline.state.phase,
            outage: self.outageInForce,
            stalled: self.links.access.stalled
        )
    }

    // MARK: - Timeline

    /// Makes sure an event wakes the model when the timeline next changes.
    func scheduleTimelineTick() {
        guard let next = self.timeline.nextChange, next != self.scheduledTimelineTick else { return }
        self.scheduledTimelineTick = next
        self.schedule(.timelineTick, at: next)
    }

    /// The timeline's changes due now (one moment: ticks are scheduled at each change).
    func timelineTick() {
        if self.scheduledTimelineTick == self.now { self.scheduledTimelineTick = nil }
        self.timeline.advance(to: self.now)
        self.refresh()
        self.scheduleTimelineTick()
    }

    /// Brings conditions, outage and stalls in line with the timeline, and reports a change of state.
    func refresh() {
        self.links.access.follow(self.timeline, at: self.now)
        if self.links.access.conditions != self.conditions { self.apply(self.links.access.conditions) }

        let outage = self.links.access.outage
        if outage != self.outageInForce {
            self.outageInForce = outage
            if outage == .reset { self.cutAllConnections(.reset) }
        }

        self.isTransparent =
            self.conditions.isPassThrough && self.outageInForce == nil && self.links.access.stalled.isEmpty
            && self.links.pathRoutes.isEmpty && self.links.radio == nil
            // A connection a handover stranded stays dead on a link that imposes nothing.
            && !self.flows.values.contains(where: \.stranded)

        let state = self.state
        if state != self.lastState {
            self.lastState = state
            self.pendingNotices.append(.stateChanged(state, at: self.now))
        }
    }

    /// New conditions for the senders of every open connection, from now on (the paths have them).
    private func apply(_ conditions: LinkConditions) {
        self.conditions = conditions
        for (index, direction) in Direction.allCases.enumerated() {
            self.shapes[index] = SegmentShape(conditions.direction(direction), mss: self.shapes[index].mss)
        }
        for flow in self.flows.values { self.retarget(flow) }
    }

    /// The flow's senders aim at the path it takes now: the access link's rate and round trip, and
    /// its route's.
    func retarget(_ flow: Flow) {
        for side in [flow.up, flow.down] {
            let rate = self.pathRate(side.direction, route: flow.route)
            side.capRate = side.tcp == .bbr ? rate : nil
            side.window.retarget(
                mss: self.shapes[self.index(side.direction)].mss, bandwidth: rate,
                baseRTT: self.links.roundTrip(route: flow.route, from: self.now))
        }
    }

    /// The rate one connection on `route` can reach alone in `direction`: the lower of the access
    /// link's and the route's.
    func pathRate(_ direction: Direction, route: Int?) -> Bandwidth? {
        let access = self.conditions.direction(direction).pathRate
        guard let route, let beyond = self.links.route(route).conditions.direction(direction).pathRate else {
            return access
        }
        return access.map { min($0, beyond) } ?? beyond
    }

    func cutAllConnections(_ mode: CutMode, route: Int? = nil) {
        for id in self.flows.keys.sorted() where route == nil || self.flows[id]?.route == route {
            switch mode {
            case .reset: self.counters.resets += 1
            case .close: self.counters.closes += 1
            }
            self.pendingNotices.append(.cut(id, mode, at: self.now))
            self.flows[id] = nil
        }
    }
}
