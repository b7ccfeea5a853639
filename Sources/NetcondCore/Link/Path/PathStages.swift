/// The stages of one direction of the link that never see a unit, only its size and moments: the
/// outage gate, loss, the bottleneck queue, the delay line (or a reordering), and the draws for a
/// changed byte and a copy. Not generic, so it is compiled once, here, and ``LinkPath`` (generic
/// over what it carries, and specialised where an engine uses it) only holds the units.
@usableFromInline
struct PathStages {
    @usableFromInline private(set) var conditions: LinkDirection
    @usableFromInline var blackholed = false
    private var loss: LossProcess
    private(set) var queue: BottleneckQueue
    private(set) var delay: DelayLine
    private var random: SeededRandom
    @usableFromInline var counters = PathCounters()

    init(_ conditions: LinkDirection, seed: UInt64) {
        self.conditions = conditions
        self.loss = LossProcess(spec: conditions.loss, seed: seed &+ 1)
        self.queue = BottleneckQueue(
            rate: conditions.bandwidth, trace: conditions.trace, series: conditions.series,
            limit: conditions.queueLimit, discipline: conditions.aqm)
        self.delay = DelayLine(latency: conditions.latency, jitter: conditions.jitter, seed: seed &+ 2)
        self.random = SeededRandom(seed: seed &+ 3)
    }

    mutating func reconfigure(_ conditions: LinkDirection) {
        self.conditions = conditions
        self.loss.reconfigure(conditions.loss)
        self.queue.reconfigure(
            rate: conditions.bandwidth, trace: conditions.trace, series: conditions.series,
            limit: conditions.queueLimit, discipline: conditions.aqm)
        self.delay.reconfigure(latency: conditions.latency, jitter: conditions.jitter)
    }

    /// What happens to `bytes` offered at `now` before the queue lets them go.
    @usableFromInline
    enum Entry {
        case dropped(PathDrop)
        case departs(Instant)
        /// The queue is stopped (a stall): the unit waits.
        case held
    }

    /// The outage gate, loss and the bottleneck queue, with their counters.
    @usableFromInline
    mutating func enter(bytes: Int, at now: Instant) -> Entry {
        self.counters.offered += 1
        if self.blackholed {
            self.counters.outageDrops += 1
            return .dropped(.outage)
        }
        if let series = self.conditions.series {
            // The series' loss in force now (its stream of draws is the direction's, as always).
            let p = series.conditions(at: now).loss
            self.loss.reconfigure(p.value > 0 ? .bernoulli(p) : .none)
        }
        if self.loss.nextIsLost() {
            self.counters.lost += 1
            return .dropped(.lost)
        }
        switch self.queue.admit(bytes: bytes, at: now) {
        case .departs(let departure): return .departs(departure)
        case .held: return .held
        case .full:
            self.counters.queueDrops += 1
            return .dropped(.queueFull)
        case .aqm:
            self.counters.aqmDrops += 1
            return .dropped(.aqm)
        }
    }

    /// A unit that waited out a stall starts at `now` (nil: CoDel dropped it at the head).
    mutating func enterHeld(bytes: Int, arrivedAt arrival: Instant, at now: Instant) -> Instant? {
        switch self.queue.admitHeld(bytes: bytes, arrivedAt: arrival, at: now) {
        case .departs(let departure): return departure
        case .aqm:
            self.counters.aqmDrops += 1
            return nil
        case .held, .full:
            preconditionFailure("a queue that started again holds and refuses nothing it already took")
        }
    }

    /// When a unit that left the queue at `departure` reaches the far end of the delay line (or,
    /// held back, later: a reordering).
    @usableFromInline
    mutating func arrival(departingAt departure: Instant) -> Instant {
        let c = self.conditions
        if let late = Reordering(chance: c.reorder, gap: c.reorderGap).heldBack(
            departingAt: departure, latency: c.latency, random: &self.random)
        {
            self.counters.reordered += 1
            return late
        }
        if let series = c.series {
            self.delay.reconfigure(latency: series.conditions(at: departure).delay, jitter: c.jitter)
        }
        return self.delay.arrival(departingAt: departure)
    }

    /// The draws for a unit of `bytes` that is delivered: the offset of a changed byte, and whether a copy follows.
    @usableFromInline
    mutating func damage(bytes: Int) -> (corruptByte: Int?, duplicated: Bool) {
        let c = self.conditions
        var corrupt: Int?
        if c.corrupt.value > 0 && bytes > 0 && self.random.chance(c.corrupt.value) {
            corrupt = Int(self.random.next() % UInt64(bytes))
            self.counters.corrupted += 1
        }
        let copied = c.duplicate.value > 0 && self.random.chance(c.duplicate.value)
        if copied { self.counters.duplicated += 1 }
        return (corrupt, copied)
    }

    @usableFromInline var stalledSince: Instant? { self.queue.pausedAt }

    mutating func pause(at now: Instant) {
        self.queue.pause(at: now)
    }

    /// Ends a stall: since when it lasted and how long (nil: there was none).
    mutating func resume(at now: Instant) -> (since: Instant, length: Span)? {
        guard let stall = self.queue.resume(at: now) else { return nil }
        self.delay.shift(after: stall.since, by: stall.length)
        return stall
    }
}
