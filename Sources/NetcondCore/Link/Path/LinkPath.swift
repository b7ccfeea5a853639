import HeapModule

/// One direction of the emulated link, the one both engines drive: what happens to each unit that
/// crosses it (a real packet under the packet engine; a segment the emulated TCP sender sends
/// under the stream engine), in virtual time.
///
/// ```
///  offer ─▶ outage ─▶ loss ─▶ bottleneck queue ─▶ rate ─▶ delay line ─▶ per-connection ─▶ duplicate ─▶ deliver
///           gate     (one     (drop-tail bytes/  (link    (latency +   pacer (its own     corrupt
///  (blackhole:       process   packets, CoDel;    rate)    jitter, in   rate, its own
///   dropped)         per       a stall stops               order; or    backlog)
///                    direction) the server)                reordered)
/// ```
/// `offer` decides what it can at once (a drop, or the moment of delivery) and keeps the unit;
/// the driver takes it back with ``popDelivery(upTo:)`` when it is due, waking at
/// ``nextDelivery``. A stall (``setStalled(_:at:)``) stops the queue's server: what has not left
/// the queue leaves the stall's length later, what arrives meanwhile waits (and overflows the
/// queue's limit), and what was on its way is held at the far end until the stall ends.
///
/// It reads no clock: `now` is a parameter that never goes back, and every random decision comes
/// from the direction's own seeded streams (``SeedDeriver/linkPath(_:_:)``), so the same seed and
/// the same units give the same fates.
public struct LinkPath<Unit, Connection: Hashable> {
    public private(set) var conditions: LinkDirection
    /// A `blackhole` outage: everything offered is dropped.
    public var blackholed = false
    private var loss: LossProcess
    private var queue: BottleneckQueue
    private var pacer = ConnectionPacer<Connection>()
    private var delay: DelayLine
    private var random: SeededRandom
    private var inFlight = Heap<InFlight>()
    private var order: UInt64 = 0
    /// Units that reached a stopped queue, in order (they start when the stall ends).
    private var held: [HeldUnit] = []
    public private(set) var counters = PathCounters()

    public init(_ conditions: LinkDirection, seed: UInt64) {
        self.conditions = conditions
        self.loss = LossProcess(spec: conditions.loss, seed: seed &+ 1)
        self.queue = BottleneckQueue(rate: conditions.bandwidth, limit: conditions.queueLimit, discipline: conditions.aqm)
        self.delay = DelayLine(latency: conditions.latency, jitter: conditions.jitter, seed: seed &+ 2)
        self.random = SeededRandom(seed: seed &+ 3)
    }

    /// New conditions for units offered from now on; units already on the path keep their fate.
    public mutating func reconfigure(_ conditions: LinkDirection) {
        self.conditions = conditions
        self.loss.reconfigure(conditions.loss)
        self.queue.reconfigure(rate: conditions.bandwidth, limit: conditions.queueLimit, discipline: conditions.aqm)
        self.delay.reconfigure(latency: conditions.latency, jitter: conditions.jitter)
    }

    // MARK: - Offer

    /// A unit of `bytes` (on the wire) reaches the path at `now`. `connection`: the connection it
    /// belongs to, for the per-connection rate (nil: not paced). `extraDelay` is added to its
    /// arrival (a set-up delay the driver applies to this unit alone).
    public mutating func offer(
        _ unit: Unit, bytes: Int, connection: Connection?, extraDelay: Span = .zero, at now: Instant
    ) -> PathAdmission {
        self.counters.offered += 1
        if self.blackholed {
            self.counters.outageDrops += 1
            return .dropped(.outage)
        }
        if self.loss.nextIsLost() {
            self.counters.lost += 1
            return .dropped(.lost)
        }
        switch self.queue.admit(bytes: bytes, at: now) {
        case .departs(let departure):
            return self.afterQueue(unit, bytes: bytes, connection: connection, extraDelay: extraDelay, departure: departure)
        case .held:
            self.held.append(HeldUnit(unit: unit, bytes: bytes, connection: connection, extraDelay: extraDelay, arrival: now))
            return .held
        case .full:
            self.counters.queueDrops += 1
            return .dropped(.queueFull)
        case .aqm:
            self.counters.aqmDrops += 1
            return .dropped(.aqm)
        }
    }

    /// The stages after the shared queue: the delay line (or a reordering), the connection's own
    /// rate at the far end of the shared link, a corrupted byte, a copy.
    private mutating func afterQueue(
        _ unit: Unit, bytes: Int, connection: Connection?, extraDelay: Span, departure: Instant
    ) -> PathAdmission {
        let c = self.conditions
        var arrival: Instant
        if let late = Reordering(chance: c.reorder, gap: c.reorderGap)
            .heldBack(departingAt: departure, latency: c.latency, random: &self.random)
        {
            arrival = late
            self.counters.reordered += 1
        } else {
            arrival = self.delay.arrival(departingAt: departure)
        }
        if let connection, let rate = c.connectionBandwidth {
            guard let paced = self.pacer.pace(connection, bytes: bytes, deliveredAt: arrival, rate: rate, limit: c.queueLimit)
            else {
                self.counters.queueDrops += 1
                return .dropped(.connectionQueueFull)
            }
            arrival = paced
            if self.pacer.count > 4096 { self.pacer.forget(idleBefore: departure - .seconds(10)) }
        }
        arrival = arrival + extraDelay
        var corrupt: Int?
        if c.corrupt.value > 0 && bytes > 0 && self.random.chance(c.corrupt.value) {
            corrupt = Int(self.random.next() % UInt64(bytes))
            self.counters.corrupted += 1
        }
        let copied = c.duplicate.value > 0 && self.random.chance(c.duplicate.value)
        self.insert(InFlight(at: arrival, order: 0, leaves: departure, unit: unit, corruptByte: corrupt, isCopy: false))
        if copied {
            self.counters.duplicated += 1
            self.insert(InFlight(at: arrival, order: 0, leaves: departure, unit: unit, corruptByte: nil, isCopy: true))
        }
        return .delivers(at: arrival, corruptByte: corrupt, duplicated: copied)
    }

    private mutating func insert(_ entry: InFlight) {
        var entry = entry
        self.order += 1
        entry.order = self.order
        self.inFlight.insert(entry)
    }

    // MARK: - Delivery

    /// When the next unit is due at the far end (nil: none, or all held by a stall).
    public var nextDelivery: Instant? {
        guard let first = self.inFlight.min else { return nil }
        if let since = self.stalledSince, first.at > since { return nil }
        return first.at
    }

    /// The next unit due by `now`, in order of arrival (ties in the order they were offered).
    public mutating func popDelivery(upTo now: Instant) -> PathDelivery<Unit>? {
        guard let next = self.nextDelivery, next <= now, let entry = self.inFlight.popMin() else { return nil }
        return PathDelivery(unit: entry.unit, at: entry.at, corruptByte: entry.corruptByte, isCopy: entry.isCopy)
    }

    /// Units offered and not yet taken back (dropped ones excluded).
    public var unitsOnPath: Int { self.inFlight.count + self.held.count }

    /// How long a byte offered at `now` would wait at the bottleneck before it starts onto the wire.
    public func queueingDelay(at now: Instant) -> Span {
        self.queue.wait(at: now)
    }

    // MARK: - Stalls

    /// Since when the direction is stalled (nil: it is not).
    public var stalledSince: Instant? { self.queue.pausedAt }

    /// Stalls the direction from `now`, or ends its stall. The driver takes every unit due before
    /// `now` before it starts a stall (they reached the far end already).
    public mutating func setStalled(_ stalled: Bool, at now: Instant) {
        if stalled {
            self.queue.pause(at: now)
            return
        }
        guard let (since, length) = self.queue.resume(at: now) else { return }
        // What had not left the queue when the stall began leaves its length later; what was on
        // its way reaches the far end when the stall ends (it was held there).
        var entries: [InFlight] = []
        while let entry = self.inFlight.popMin() { entries.append(entry) }
        for var entry in entries {
            if entry.leaves > since {
                entry.leaves = entry.leaves + length
                entry.at = entry.at + length
            } else if entry.at > since && entry.at < now {
                entry.at = now
            }
            self.inFlight.insert(entry)
        }
        self.pacer.shift(after: since, by: length)
        self.delay.shift(after: since, by: length)
        // What came meanwhile starts now, in order, behind them.
        let waiting = self.held
        self.held = []
        for unit in waiting {
            switch self.queue.admitHeld(bytes: unit.bytes, arrivedAt: unit.arrival, at: now) {
            case .departs(let departure):
                _ = self.afterQueue(unit.unit, bytes: unit.bytes, connection: unit.connection, extraDelay: unit.extraDelay, departure: departure)
            case .aqm:
                self.counters.aqmDrops += 1
            case .held, .full:
                preconditionFailure("a queue that started again holds and refuses nothing it already took")
            }
        }
    }

    private struct InFlight: Comparable {
        var at: Instant
        var order: UInt64
        /// When it left the shared queue.
        var leaves: Instant
        var unit: Unit
        var corruptByte: Int?
        var isCopy: Bool

        static func < (a: InFlight, b: InFlight) -> Bool { (a.at, a.order) < (b.at, b.order) }
        static func == (a: InFlight, b: InFlight) -> Bool { a.order == b.order }
    }

    private struct HeldUnit {
        var unit: Unit
        var bytes: Int
        var connection: Connection?
        var extraDelay: Span
        var arrival: Instant
    }
}

/// What the path decided about a unit when it was offered.
public enum PathAdmission: Sendable, Equatable {
    case dropped(PathDrop)
    /// It reaches the far end at this moment (later if a stall comes first); `corruptByte`: the
    /// offset of a byte changed on the way; `duplicated`: a copy arrives right behind it.
    case delivers(at: Instant, corruptByte: Int?, duplicated: Bool)
    /// The direction is stalled: it waits for the stall's end.
    case held
}

/// A unit the path has delivered.
public struct PathDelivery<Unit> {
    public var unit: Unit
    /// The moment it reached the far end.
    public var at: Instant
    /// The offset of a byte changed on the way (the receiver's checksum will discard the unit).
    public var corruptByte: Int?
    /// The second arrival of a duplicated unit.
    public var isCopy: Bool
}

extension PathDelivery: Sendable where Unit: Sendable {}

extension SeedDeriver {
    /// The seed of one direction's path under run seed `run`; both engines seed their paths with it.
    /// The bench's reference emulator (`tcp_reference.py --netcond-draws`) draws its losses from the
    /// same streams: change this and that script together.
    public static func linkPath(_ run: UInt64, _ direction: Direction) -> UInt64 {
        Self.derive(run, 0x5041_434B, direction == .up ? 0 : 1)
    }
}

/// Why the path dropped a unit.
public enum PathDrop: Sendable, Equatable {
    /// A `blackhole` outage was in force.
    case outage
    /// The loss process took it.
    case lost
    /// The bottleneck queue was full.
    case queueFull
    /// CoDel dropped it at the head of the queue.
    case aqm
    /// Its connection's own backlog (`connection_bandwidth`) was past the queue's limit.
    case connectionQueueFull
}

/// What one direction of the path did, for the summary and `GET /status`.
public struct PathCounters: Sendable, Equatable {
    public var offered = 0
    public var outageDrops = 0
    public var lost = 0
    /// Dropped by the full bottleneck queue, or by a connection's full backlog.
    public var queueDrops = 0
    public var aqmDrops = 0
    public var reordered = 0
    public var duplicated = 0
    public var corrupted = 0
}
