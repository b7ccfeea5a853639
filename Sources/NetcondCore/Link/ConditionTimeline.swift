import HeapModule

/// Conditions that change while a run goes on: the profile's schedule (phases), its periodic
/// stalls, and live changes (switch profile, start or stop an outage or a stall). Both engines
/// read their link's conditions from one: the stream engine's `LinkModel` and the packet engine.
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
/// Pure: it reads no clock. The driver asks for ``nextChange`` and calls ``advance(to:)`` then
/// (or at any later moment: every change due by then is applied in order, each at its own time).
public struct ConditionTimeline: Sendable {
    public private(set) var profile: Profile
    public let seed: UInt64
    /// Profiles started so far: each draws its durations from a stream of its own.
    private var generation = 0
    private var phaseRandom = SeededRandom(seed: 0)
    private var stallRandom = SeededRandom(seed: 0)
    public private(set) var phaseIndex: Int?
    private var phaseOutage: OutageBehaviour?
    private var phaseStall: StallDirection?
    private var periodicStall: StallDirection?
    private var liveOutage: OutageBehaviour?
    private var liveStall: StallDirection?
    private var pending = Heap<Pending>()
    private var order: UInt64 = 0
    public private(set) var now: Instant

    public init(profile: Profile, seed: UInt64, at now: Instant = .zero) {
        self.profile = profile
        self.seed = seed
        self.now = now
        self.start()
    }

    // MARK: - What holds now

    /// The link conditions in force: the current phase's, else the profile's.
    public var conditions: LinkConditions {
        self.phaseIndex.map { self.profile.schedule!.phases[$0].conditions } ?? self.profile.conditions
    }

    /// The outage in force: the live one, else the phase's.
    public var outage: OutageBehaviour? { self.liveOutage ?? self.phaseOutage }

    /// True while no byte moves in `direction`.
    public func isStalled(_ direction: Direction) -> Bool {
        [self.liveStall, self.phaseStall, self.periodicStall].contains { $0?.directions.contains(direction) ?? false }
    }

    /// What the link is doing now, for the status line and the event log.
    public var state: LinkState {
        LinkState(
            phase: self.phaseIndex.map { self.profile.schedule!.phases[$0].label } ?? self.profile.name,
            outage: self.outage,
            stalled: Direction.allCases.filter { self.isStalled($0) }
        )
    }

    /// When the next scheduled change happens (nil: nothing changes unless told).
    public var nextChange: Instant? { self.pending.min?.time }

    // MARK: - Moving on

    /// Applies every change due by `target`, in order. Returns true when any was applied.
    @discardableResult
    public mutating func advance(to target: Instant) -> Bool {
        var changed = false
        while let top = self.pending.min, top.time <= target {
            _ = self.pending.removeMin()
            if top.time > self.now { self.now = top.time }
            self.handle(top.event)
            changed = true
        }
        if target > self.now { self.now = target }
        return changed
    }

    /// Applies the changes due by `target` one moment at a time: `body` sees the timeline after all
    /// changes of one moment, at that moment, before the next moment's are applied.
    public mutating func advance(to target: Instant, eachMoment body: (ConditionTimeline) -> Void) {
        while let next = self.nextChange, next <= target {
            if self.advance(to: next) { body(self) }
        }
        if target > self.now { self.now = target }
    }

    // MARK: - Live control

    /// Replaces the profile from `now` on: its conditions, its schedule (from its first phase) and
    /// its stalls.
    public mutating func switchProfile(to profile: Profile, at now: Instant) {
        self.advance(to: now)
        self.profile = profile
        self.start()
    }

    /// Starts (or, with nil, ends) an outage from `now`, whatever the schedule says.
    public mutating func setOutage(_ outage: OutageBehaviour?, at now: Instant) {
        self.advance(to: now)
        self.liveOutage = outage
    }

    /// Stalls a direction (or, with nil, ends the live stall) from `now`.
    public mutating func setStall(_ stall: StallDirection?, at now: Instant) {
        self.advance(to: now)
        self.liveStall = stall
    }

    // MARK: - Schedule

    private mutating func start() {
        // The old profile's schedule and stalls end here.
        self.pending = Heap()
        self.generation += 1
        self.phaseRandom = SeededRandom(seed: SeedDeriver.derive(self.seed, 0x5048_4153, UInt64(self.generation)))
        self.stallRandom = SeededRandom(seed: SeedDeriver.derive(self.seed, 0x5354_414C, UInt64(self.generation)))
        self.phaseIndex = nil
        self.phaseOutage = nil
        self.phaseStall = nil
        self.periodicStall = nil
        if let stalls = self.profile.stalls {
            self.schedule(.stallBegins, at: self.now + stalls.every.draw(&self.stallRandom))
        }
        if self.profile.schedule != nil { self.beginPhase(0) }
    }

    private mutating func handle(_ event: Event) {
        switch event {
        case .phase(let index):
            self.beginPhase(index)
        case .scheduleEnds:
            self.phaseIndex = nil
            self.phaseOutage = nil
            self.phaseStall = nil
        case .stallBegins:
            guard let stalls = self.profile.stalls else { return }
            self.periodicStall = stalls.direction
            let length = stalls.duration.draw(&self.stallRandom)
            let gap = stalls.every.draw(&self.stallRandom)
            self.schedule(.stallEnds, at: self.now + length)
            // Validation keeps `every` above `for`, so the next stall starts after this one ends.
            self.schedule(.stallBegins, at: self.now + max(gap, length))
        case .stallEnds:
            self.periodicStall = nil
        }
    }

    private mutating func beginPhase(_ index: Int) {
        guard let schedule = self.profile.schedule else { return }
        let phase = schedule.phases[index]
        self.phaseIndex = index
        self.phaseOutage = phase.outage
        self.phaseStall = phase.stall
        let end = self.now + phase.duration.draw(&self.phaseRandom)
        if index + 1 < schedule.phases.count {
            self.schedule(.phase(index: index + 1), at: end)
        } else if schedule.repeats {
            self.schedule(.phase(index: 0), at: end)
        } else {
            self.schedule(.scheduleEnds, at: end)
        }
    }

    private mutating func schedule(_ event: Event, at time: Instant) {
        self.order += 1
        self.pending.insert(Pending(time: max(time, self.now), order: self.order, event: event))
    }

    private enum Event {
        case phase(index: Int)
        case scheduleEnds
        case stallBegins
        case stallEnds
    }

    private struct Pending: Comparable {
        var time: Instant
        var order: UInt64
        var event: Event

        static func < (a: Pending, b: Pending) -> Bool { (a.time, a.order) < (b.time, b.order) }
        static func == (a: Pending, b: Pending) -> Bool { a.time == b.time && a.order == b.order }
    }
}
