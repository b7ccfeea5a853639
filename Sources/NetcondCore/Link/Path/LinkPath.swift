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
    /// The stages that see only sizes and moments (compiled once, not per unit type).
    @usableFromInline var stages: PathStages
    @usableFromInline var pacer = ConnectionPacer<Connection>()
    @usableFromInline var inFlight = Heap<InFlight>()
    @usableFromInline var order: UInt64 = 0
    /// Units that reached a stopped queue, in order (they start when the stall ends).
    @usableFromInline var held: [HeldUnit] = []

    public init(_ conditions: LinkDirection, seed: UInt64) {
        self.stages = PathStages(conditions, seed: seed)
    }

    @inlinable public var conditions: LinkDirection { self.stages.conditions }

    @inlinable public var counters: PathCounters { self.stages.counters }

    /// A `blackhole` outage: everything offered is dropped.
    @inlinable public var blackholed: Bool {
        get { self.stages.blackholed }
        set { self.stages.blackholed = newValue }
    }

    /// New conditions for units offered from now on; units already on the path keep their fate.
    public mutating func reconfigure(_ conditions: LinkDirection) {
        self.stages.reconfigure(conditions)
    }

    // MARK: - Offer

    /// A unit of `bytes` (on the wire) reaches the path at `now`. `connection`: the connection it
    /// belongs to, for the per-connection rate (nil: not paced). `extraDelay` is added to its
    /// arrival (a set-up delay the driver applies to this unit alone).
    @inlinable
    public mutating func offer(
        _ unit: Unit, bytes: Int, connection: Connection?, extraDelay: Span = .zero, at now: Instant
    ) -> PathAdmission {
        switch self.stages.enter(bytes: bytes, at: now) {
        case .dropped(let why):
            return .dropped(why)
        case .departs(let departure):
            return self.afterQueue(
                unit, bytes: bytes, connection: connection, extraDelay: extraDelay, departure: departure)
        case .held:
            self.held.append(
                HeldUnit(unit: unit, bytes: bytes, connection: connection, extraDelay: extraDelay, arrival: now))
            return .held
        }
    }

    /// The stages after the shared queue: the delay line (or a reordering), the connection's own
    /// rate at the far end of the shared link, a corrupted byte, a copy.
    @inlinable
    mutating func afterQueue(
        _ unit: Unit, bytes: Int, connection: Connection?, extraDelay: Span, departure: Instant
    ) -> PathAdmission {
        var arrival = self.stages.arrival(departingAt: departure)
        if let connection, let rate = self.stages.conditions.connectionBandwidth {
            guard
                let paced = self.pacer.pace(
                    connection, bytes: bytes, deliveredAt: arrival, rate: rate, limit: self.stages.conditions.queueLimit
                )
            else {
                self.stages.counters.queueDrops += 1
                return .dropped(.connectionQueueFull)
            }
            arrival = paced
            if self.pacer.count > 4096 { self.pacer.forget(idleBefore: departure - .seconds(10)) }
        }
        arrival = arrival + extraDelay
        let (corrupt, copied) = self.stages.damage(bytes: bytes)
        self.insert(InFlight(at: arrival, order: 0, leaves: departure, unit: unit, corruptByte: corrupt, isCopy: false))
        if copied {
            self.insert(InFlight(at: arrival, order: 0, leaves: departure, unit: unit, corruptByte: nil, isCopy: true))
        }
        return .delivers(at: arrival, corruptByte: corrupt, duplicated: copied)
    }

    @inlinable
    mutating func insert(_ entry: InFlight) {
        var entry = entry
        self.order += 1
        entry.order = self.order
        self.inFlight.insert(entry)
    }

    // MARK: - Delivery

    /// When the next unit is due at the far end (nil: none, or all held by a stall).
    @inlinable
    public var nextDelivery: Instant? {
        guard let first = self.inFlight.min else { return nil }
        if let since = self.stages.stalledSince, first.at > since { return nil }
        return first.at
    }

    /// The next unit due by `now`, in order of arrival (ties in the order they were offered).
    @inlinable
    public mutating func popDelivery(upTo now: Instant) -> PathDelivery<Unit>? {
        guard let next = self.nextDelivery, next <= now, let entry = self.inFlight.popMin() else { return nil }
        return PathDelivery(unit: entry.unit, at: entry.at, corruptByte: entry.corruptByte, isCopy: entry.isCopy)
    }

    /// Units offered and not yet taken back (dropped ones excluded).
    public var unitsOnPath: Int { self.inFlight.count + self.held.count }

    /// How long a byte offered at `now` would wait at the bottleneck before it starts onto the wire.
    public func queueingDelay(at now: Instant) -> Span {
        self.stages.queue.wait(at: now)
    }

    // MARK: - Stalls

    /// Since when the direction is stalled (nil: it is not).
    public var stalledSince: Instant? { self.stages.stalledSince }

    /// Stalls the direction from `now`, or ends its stall. The driver takes every unit due before
    /// `now` before it starts a stall (they reached the far end already).
    public mutating func setStalled(_ stalled: Bool, at now: Instant) {
        if stalled {
            self.stages.pause(at: now)
            return
        }
        guard let (since, length) = self.stages.resume(at: now) else { return }
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
        // What came meanwhile starts now, in order, behind them.
        let waiting = self.held
        self.held = []
        for unit in waiting {
            if let departure = self.stages.enterHeld(bytes: unit.bytes, arrivedAt: unit.arrival, at: now) {
                _ = self.afterQueue(
                    unit.unit, bytes: unit.bytes, connection: unit.connection, extraDelay: unit.extraDelay,
                    departure: departure)
            }
        }
    }

    @usableFromInline
    struct InFlight: Comparable {
        @usableFromInline var at: Instant
        @usableFromInline var order: UInt64
        /// When it left the shared queue.
        @usableFromInline var leaves: Instant
        @usableFromInline var unit: Unit
        @usableFromInline var corruptByte: Int?
        @usableFromInline var isCopy: Bool

        @inlinable
        init(at: Instant, order: UInt64, leaves: Instant, unit: Unit, corruptByte: Int?, isCopy: Bool) {
            self.at = at
            self.order = order
            self.leaves = leaves
            self.unit = unit
            self.corruptByte = corruptByte
            self.isCopy = isCopy
        }

        @inlinable static func < (a: InFlight, b: InFlight) -> Bool { (a.at, a.order) < (b.at, b.order) }
        @inlinable static func == (a: InFlight, b: InFlight) -> Bool { a.order == b.order }
    }

    @usableFromInline
    struct HeldUnit {
        @usableFromInline var unit: Unit
        @usableFromInline var bytes: Int
        @usableFromInline var connection: Connection?
        @usableFromInline var extraDelay: Span
        @usableFromInline var arrival: Instant

        @inlinable
        init(unit: Unit, bytes: Int, connection: Connection?, extraDelay: Span, arrival: Instant) {
            self.unit = unit
            self.bytes = bytes
            self.connection = connection
            self.extraDelay = extraDelay
            self.arrival = arrival
        }
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

    @inlinable
    public init(unit: Unit, at: Instant, corruptByte: Int?, isCopy: Bool) {
        self.unit = unit
        self.at = at
        self.corruptByte = corruptByte
        self.isCopy = isCopy
    }
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
