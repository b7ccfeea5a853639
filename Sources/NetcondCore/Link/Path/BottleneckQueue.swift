import DequeModule

/// The bottleneck of one direction: a FIFO served at the link rate that drops arrivals at its tail
/// while it is full, and with CoDel also at its head. A stall stops its server.
///
/// ```
///  arrives t ──▶ [ p3 p2 p1 ] ──rate──▶ p1 leaves at max(t, when the one before left) + size·8/rate
///                 full (bytes, or packets): the arrival is dropped
///                 CoDel: at the head, max(t, when the one before left), a packet that waited too
///                 long, too persistently, is dropped (``CoDelState``)
///  stall s…e:     nothing leaves; what was waiting at s leaves e − s later, in the same order;
///                 what arrives meanwhile is held (``Admission/held``) and starts at e, behind it
/// ```
/// A packet counts against the limit from its arrival until it has left the link (the one being
/// serialized included), as in a router's transmit queue. Without a rate nothing waits and nothing
/// is dropped, except while stalled: a stalled direction's buffer holds the queue's worth.
///
/// With a trace instead of a rate (``LinkTrace``) the server is the trace's delivery
/// opportunities: each carries up to 1,500 bytes of what waits at its moment, a packet larger
/// than what is left of one spans the next ones, and one nothing waits for is lost:
/// ```
///  opportunities  ·  ·     ·  ·  ·           ·
///  p1 (1,500 B)   ▮                     p1 leaves at the first opportunity after it reached the head
///  p2 (2,000 B)      ▮     ▮            p2 needs two; it leaves at the second
///  p3 (500 B)              ▮            p3 came before it: it takes what p2 left of that one
/// ```
struct BottleneckQueue {
    private(set) var rate: Bandwidth?
    private(set) var trace: LinkTrace?
    /// A step series: the rate in force when a packet reaches the head serves it.
    private(set) var series: LinkSeries?
    /// The trace's opportunity last used, and the bytes it still had for a packet already waiting.
    private var traceCursor: (at: LinkTrace.Opportunity, left: Int)?
    private(set) var limit: QueueLimit
    private var codel: CoDelState?
    /// Packets not yet gone, in order: when each leaves, and its size.
    private var waiting = Deque<(departure: Instant, bytes: Int)>()
    private var waitingBytes = 0
    private var lastDeparture = Instant.zero
    /// Since when the server is stopped (nil: it serves), and what arrived meanwhile.
    private(set) var pausedAt: Instant?
    private var held = (bytes: 0, packets: 0)

    init(
        rate: Bandwidth?, trace: LinkTrace? = nil, series: LinkSeries? = nil, limit: QueueLimit,
        discipline: QueueDiscipline = .dropTail
    ) {
        self.rate = rate
        self.trace = trace
        self.series = series
        self.limit = limit
        self.reconfigure(discipline: discipline)
    }

    /// A new rate and limit for packets that arrive from now on (those already queued leave as
    /// they were scheduled).
    mutating func reconfigure(
        rate: Bandwidth?, trace: LinkTrace? = nil, series: LinkSeries? = nil, limit: QueueLimit,
        discipline: QueueDiscipline = .dropTail
    ) {
        self.rate = rate
        self.series = series
        if trace != self.trace {
            self.trace = trace
            self.traceCursor = nil
        }
        self.limit = limit
        self.reconfigure(discipline: discipline)
    }

    /// CoDel keeps its state across a change of its parameters (the queue is the same queue).
    private mutating func reconfigure(discipline: QueueDiscipline) {
        switch discipline {
        case .dropTail:
            self.codel = nil
        case .codel(let target, let interval):
            if self.codel == nil { self.codel = CoDelState(target: target, interval: interval) }
            self.codel?.target = target
            self.codel?.interval = interval
        }
    }

    /// What becomes of a packet offered to the queue.
    enum Admission: Equatable {
        /// It has left the link at this moment.
        case departs(Instant)
        /// The server is stopped: it waits, and leaves after the stall (``resume(at:)``).
        case held
        /// Dropped at the tail: the queue was full.
        case full
        /// Dropped at the head by CoDel.
        case aqm
    }

    /// Bytes and packets queued at `now` (those not yet gone from the link; while stalled, what was
    /// waiting when it began and what came since).
    mutating func occupancy(at now: Instant) -> (bytes: Int, packets: Int) {
        let served = self.pausedAt.map { min($0, now) } ?? now
        while let first = self.waiting.first, first.departure <= served {
            self.waiting.removeFirst()
            self.waitingBytes -= first.bytes
        }
        return (self.waitingBytes + self.held.bytes, self.waiting.count + self.held.packets)
    }

    /// When a packet of `bytes` arriving at `now` has left the link, or why it was dropped.
    mutating func admit(bytes: Int, at now: Instant) -> Admission {
        guard self.rate != nil || self.trace != nil || self.series != nil || self.pausedAt != nil else {
            return .departs(now)
        }
        let (queuedBytes, queuedPackets) = self.occupancy(at: now)
        switch self.limit {
        case .bytes(let limit):
            if queuedBytes + bytes > limit.bytes && queuedPackets > 0 { return .full }
        case .packets(let limit):
            if queuedPackets >= limit { return .full }
        }
        if self.pausedAt != nil {
            self.held.bytes += bytes
            self.held.packets += 1
            return .held
        }
        return self.serve(bytes: bytes, arrivedAt: now, earliest: now, queuedBytes: queuedBytes)
    }

    /// The packet reaches the head of the queue no earlier than `earliest`, having arrived at
    /// `arrival`: it starts onto the wire behind the one before it, or CoDel drops it there.
    private mutating func serve(bytes: Int, arrivedAt arrival: Instant, earliest: Instant, queuedBytes: Int)
        -> Admission
    {
        guard self.rate != nil || self.trace != nil || self.series != nil else { return .departs(earliest) }
        let head = max(earliest, self.lastDeparture)
        if self.codel?.shouldDrop(at: head, sojourn: head - arrival, bytesAhead: queuedBytes) == true {
            // Dropped as it reached the head: it takes no time on the wire.
            return .aqm
        }
        let departure: Instant
        if let trace = self.trace {
            departure = self.traceDeparture(bytes: bytes, head: head, trace: trace)
        } else if let series = self.series {
            departure = series.departure(bytes: bytes, startingAt: head)
        } else {
            departure = head + self.rate!.transmissionTime(bytes: Int64(bytes))
        }
        self.lastDeparture = departure
        self.waiting.append((departure, bytes))
        self.waitingBytes += bytes
        return .departs(departure)
    }

    /// The opportunity that carries a packet's last byte, the packet having reached the head of the
    /// queue at `head`: what is left of the last one used, if that one came no earlier than `head`,
    /// then the next ones, 1,500 bytes each.
    private mutating func traceDeparture(bytes: Int, head: Instant, trace: LinkTrace) -> Instant {
        var remaining = max(1, bytes)
        var at: LinkTrace.Opportunity
        if let cursor = self.traceCursor, trace.time(of: cursor.at) >= head {
            if cursor.left >= remaining {
                self.traceCursor = (cursor.at, cursor.left - remaining)
                return trace.time(of: cursor.at)
            }
            remaining -= cursor.left
            at = trace.next(after: cursor.at)
        } else {
            at = trace.first(atOrAfter: head)
        }
        while remaining > LinkTrace.opportunityBytes {
            remaining -= LinkTrace.opportunityBytes
            at = trace.next(after: at)
        }
        self.traceCursor = (at, LinkTrace.opportunityBytes - remaining)
        return trace.time(of: at)
    }

    /// The server stops at `now` (a stall begins). Idempotent.
    mutating func pause(at now: Instant) {
        guard self.pausedAt == nil else { return }
        _ = self.occupancy(at: now)
        self.pausedAt = now
    }

    /// The server starts again at `now`: what was waiting leaves `now − pausedAt` later than it
    /// would have (``shift``), and the caller then offers the held packets again, in order, with
    /// ``admitHeld(bytes:arrivedAt:at:)``. Returns the stall's start and length (nil: not paused).
    mutating func resume(at now: Instant) -> (since: Instant, length: Span)? {
        guard let since = self.pausedAt else { return nil }
        let length = now > since ? now - since : .zero
        self.pausedAt = nil
        self.held = (0, 0)
        self.waiting = Deque(self.waiting.map { ($0.departure + length, $0.bytes) })
        if self.lastDeparture > since { self.lastDeparture = self.lastDeparture + length }
        // A trace's opportunities during the stall are lost; what comes next takes the first after it.
        self.traceCursor = nil
        return (since, length)
    }

    /// A packet held through a stall reaches the queue's server (which started again at `now`):
    /// it was counted against the limit when it came, so only CoDel can drop it now.
    mutating func admitHeld(bytes: Int, arrivedAt arrival: Instant, at now: Instant) -> Admission {
        let (queuedBytes, _) = self.occupancy(at: now)
        return self.serve(bytes: bytes, arrivedAt: arrival, earliest: now, queuedBytes: queuedBytes)
    }

    /// How long a packet arriving at `now` would wait before it starts onto the wire.
    func wait(at now: Instant) -> Span {
        let from = self.pausedAt.map { max($0, now) } ?? now
        return self.lastDeparture > from ? self.lastDeparture - from : .zero
    }
}

/// How much a bottleneck queue holds before it drops: bytes (the profile's `queue: 64KB`) or
/// packets (`queue: 100 packets`, as router and netem queues count).
public enum QueueLimit: Sendable, Equatable {
    case bytes(ByteCount)
    case packets(Int)
}
