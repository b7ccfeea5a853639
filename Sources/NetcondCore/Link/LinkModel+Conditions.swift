/// Conditions that change while a run goes on: the profile's schedule (phases), its periodic
/// stalls, and live changes (switch profile, start or stop an outage or a stall).
///
/// ```
///  time ─▶ │ lte 60–120 s                │ tunnel 20–40 s (blackhole) │ lte …     schedule phases (repeat)
///          │      ▇ stall        ▇       │        ▇                   │   ▇       periodic stalls
///                          ▲ live: outage reset                                  live layer
/// ```
/// Layers, highest first: conditions come from the current schedule phase, else the profile (a
/// live switch replaces the profile and restarts its schedule); the outage in force is the live one,
/// else the phase's; a direction is stalled when the live layer, the phase or a periodic stall says
/// so. Durations drawn from ranges come from the run's seed, so a seed repeats the same timeline.
///
/// Nothing already accepted is lost by a change: queued and in-flight segments keep their place
/// and are served under the new conditions. A `blackhole` drops what departs while it lasts (TCP
/// repairs it by timeout, with backoff, once the link is back); `refuse` and `reset` answer new
/// connections with a refusal one round trip after the SYN and let open ones carry on (the far
/// end is reachable but turns connections away); only a `reset` outage discards connections, when
/// it begins, and each is counted and reported.
struct TimelineState {
    /// Bumped when a profile (and its schedule) starts: events of an older schedule are ignored.
    var generation = 0
    var phaseRandom = SeededRandom(seed: 0)
    var stallRandom = SeededRandom(seed: 0)
    var phaseIndex: Int?
    var phaseOutage: OutageBehaviour?
    var phaseStall: StallDirection?
    var periodicStall: StallDirection?
    var liveOutage: OutageBehaviour?
    var liveStall: StallDirection?
    /// The outage in force.
    var outage: OutageBehaviour?
    var lastState: LinkState?
}

enum TimelineEvent {
    case phase(index: Int, generation: Int)
    case scheduleEnds(generation: Int)
    case stallBegins(generation: Int)
    case stallEnds(generation: Int)
}

extension LinkModel {
    // MARK: - Live control

    /// Replaces the profile from `now` on: its conditions, its schedule (from its first phase) and
    /// its stalls. Connections stay open; new ones use its `tcp`.
    public func switchProfile(to profile: Profile, at now: Instant) {
        self.catchUp(to: now)
        self.profile = profile
        self.startTimeline()
    }

    /// Starts (or, with nil, ends) an outage from `now`, whatever the schedule says.
    public func setOutage(_ outage: OutageBehaviour?, at now: Instant) {
        self.catchUp(to: now)
        self.timeline.liveOutage = outage
        self.refresh()
    }

    /// Stalls a direction (or, with nil, ends the live stall) from `now`.
    public func setStall(_ stall: StallDirection?, at now: Instant) {
        self.catchUp(to: now)
        self.timeline.liveStall = stall
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
        let phase = self.timeline.phaseIndex.map { self.profile.schedule!.phases[$0].label } ?? self.profile.name
        return LinkState(
            phase: phase,
            outage: self.timeline.outage,
            stalled: Direction.allCases.filter { self.link($0).paused }
        )
    }

    // MARK: - Timeline

    func startTimeline() {
        self.timeline.generation += 1
        let generation = self.timeline.generation
        self.timeline.phaseRandom = SeededRandom(seed: SeedDeriver.derive(self.seed, 0x5048_4153, UInt64(generation)))
        self.timeline.stallRandom = SeededRandom(seed: SeedDeriver.derive(self.seed, 0x5354_414C, UInt64(generation)))
        self.timeline.phaseIndex = nil
        self.timeline.phaseOutage = nil
        self.timeline.phaseStall = nil
        self.timeline.periodicStall = nil
        if let stalls = self.profile.stalls {
            let first = self.now + stalls.every.draw(&self.timeline.stallRandom)
            self.schedule(.timeline(.stallBegins(generation: generation)), at: first)
        }
        if self.profile.schedule != nil {
            self.beginPhase(0)
        } else {
            self.refresh()
        }
    }

    func handleTimeline(_ event: TimelineEvent) {
        switch event {
        case .phase(let index, let generation):
            guard generation == self.timeline.generation else { return }
            self.beginPhase(index)
        case .scheduleEnds(let generation):
            guard generation == self.timeline.generation else { return }
            self.timeline.phaseIndex = nil
            self.timeline.phaseOutage = nil
            self.timeline.phaseStall = nil
            self.refresh()
        case .stallBegins(let generation):
            guard generation == self.timeline.generation, let stalls = self.profile.stalls else { return }
            self.timeline.periodicStall = stalls.direction
            let length = stalls.duration.draw(&self.timeline.stallRandom)
            let gap = stalls.every.draw(&self.timeline.stallRandom)
            self.schedule(.timeline(.stallEnds(generation: generation)), at: self.now + length)
            // Validation keeps `every` above `for`, so the next stall starts after this one ends.
            self.schedule(.timeline(.stallBegins(generation: generation)), at: self.now + max(gap, length))
            self.refresh()
        case .stallEnds(let generation):
            guard generation == self.timeline.generation else { return }
            self.timeline.periodicStall = nil
            self.refresh()
        }
    }

    private func beginPhase(_ index: Int) {
        guard let schedule = self.profile.schedule else { return }
        let phase = schedule.phases[index]
        let generation = self.timeline.generation
        self.timeline.phaseIndex = index
        self.timeline.phaseOutage = phase.outage
        self.timeline.phaseStall = phase.stall
        let end = self.now + phase.duration.draw(&self.timeline.phaseRandom)
        if index + 1 < schedule.phases.count {
            self.schedule(.timeline(.phase(index: index + 1, generation: generation)), at: end)
        } else if schedule.repeats {
            self.schedule(.timeline(.phase(index: 0, generation: generation)), at: end)
        } else {
            self.schedule(.timeline(.scheduleEnds(generation: generation)), at: end)
        }
        self.refresh()
    }

    /// Brings conditions, outage and stalls in line with the layers, and reports a change of state.
    private func refresh() {
        let target = self.timeline.phaseIndex.map { self.profile.schedule!.phases[$0].conditions }
            ?? self.profile.conditions
        if target != self.conditions { self.apply(target) }

        let outage = self.timeline.liveOutage ?? self.timeline.phaseOutage
        if outage != self.timeline.outage {
            self.timeline.outage = outage
            if outage == .reset { self.cutAllConnections(.reset) }
        }

        let stalls = [self.timeline.liveStall, self.timeline.phaseStall, self.timeline.periodicStall]
        for direction in Direction.allCases {
            let link = self.link(direction)
            let stalled = stalls.contains { $0?.directions.contains(direction) ?? false }
            guard stalled != link.paused else { continue }
            link.paused = stalled
            if !stalled {
                self.releaseHeldArrivals(link)
                self.serve(link)
            }
        }

        self.isTransparent = self.conditions.isPassThrough && self.timeline.outage == nil && !self.upLink.paused && !self.downLink.paused

        let state = self.state
        if state != self.timeline.lastState {
            self.timeline.lastState = state
            self.pendingNotices.append(.stateChanged(state, at: self.now))
        }
    }

    /// New conditions for the links and every open connection, from now on.
    private func apply(_ conditions: LinkConditions) {
        self.conditions = conditions
        self.upLink.configure(conditions.up)
        self.downLink.configure(conditions.down)
        for flow in self.flows.values {
            for side in [flow.up, flow.down] {
                let spec = conditions.direction(side.direction)
                side.loss.reconfigure(spec.loss)
                side.delay.reconfigure(latency: spec.latency, jitter: spec.jitter)
                side.capRate = self.capRate(for: spec, tcp: side.tcp)
                side.window.retarget(
                    mss: self.link(side.direction).unitSize,
                    bandwidth: spec.pathRate,
                    baseRTT: conditions.baseRTT
                )
            }
        }
        // A link that lost its rate limit lets its queue go at once.
        self.serve(self.upLink)
        self.serve(self.downLink)
    }

    private func cutAllConnections(_ mode: CutMode) {
        for id in self.flows.keys.sorted() {
            switch mode {
            case .reset: self.counters.resets += 1
            case .close: self.counters.closes += 1
            }
            self.pendingNotices.append(.cut(id, mode, at: self.now))
        }
        self.flows.removeAll()
    }
}
