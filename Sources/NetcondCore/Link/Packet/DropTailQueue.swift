import DequeModule

/// The bottleneck of one direction for whole packets: a FIFO served at the link rate that drops
/// arrivals at its tail while it is full, and with CoDel also at its head.
///
/// ```
///  arrives t ──▶ [ p3 p2 p1 ] ──rate──▶ p1 leaves at max(t, when the one before left) + size·8/rate
///                 full (bytes, or packets): the arrival is dropped
///                 CoDel: at the head, max(t, when the one before left), a packet that waited too
///                 long, too persistently, is dropped (``CoDelState``)
/// ```
/// A packet counts against the limit from its arrival until it has left the link (the one being
/// serialized included), as in a router's transmit queue. Without a rate nothing waits and
/// nothing is dropped.
struct DropTailQueue {
    private(set) var rate: Bandwidth?
    private(set) var limit: QueueLimit
    private var codel: CoDelState?
    /// Packets not yet gone, in order: when each leaves, and its size.
    private var waiting = Deque<(departure: Instant, bytes: Int)>()
    private var waitingBytes = 0
    private var lastDeparture = Instant.zero

    init(rate: Bandwidth?, limit: QueueLimit, discipline: QueueDiscipline = .dropTail) {
        self.rate = rate
        self.limit = limit
        self.reconfigure(discipline: discipline)
    }

    /// A new rate and limit for packets that arrive from now on (those already queued leave as
    /// they were scheduled).
    mutating func reconfigure(rate: Bandwidth?, limit: QueueLimit, discipline: QueueDiscipline = .dropTail) {
        self.rate = rate
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
        /// Dropped at the tail: the queue was full.
        case full
        /// Dropped at the head by CoDel.
        case aqm
    }

    /// Bytes and packets queued at `now` (those not yet gone from the link).
    mutating func occupancy(at now: Instant) -> (bytes: Int, packets: Int) {
        while let first = self.waiting.first, first.departure <= now {
            self.waiting.removeFirst()
            self.waitingBytes -= first.bytes
        }
        return (self.waitingBytes, self.waiting.count)
    }

    /// When a packet of `bytes` arriving at `now` has left the link, or why it was dropped.
    mutating func admit(bytes: Int, at now: Instant) -> Admission {
        guard let rate = self.rate else { return .departs(now) }
        let (queuedBytes, queuedPackets) = self.occupancy(at: now)
        switch self.limit {
        case .bytes(let limit):
            if queuedBytes + bytes > limit.bytes && queuedPackets > 0 { return .full }
        case .packets(let limit):
            if queuedPackets >= limit { return .full }
        }
        let head = max(now, self.lastDeparture)
        if self.codel?.shouldDrop(at: head, sojourn: head - now, bytesAhead: queuedBytes) == true {
            // Dropped as it reached the head: it takes no time on the wire.
            return .aqm
        }
        let departure = head + rate.transmissionTime(bytes: Int64(bytes))
        self.lastDeparture = departure
        self.waiting.append((departure, bytes))
        self.waitingBytes += bytes
        return .departs(departure)
    }
}

/// How much a bottleneck queue holds before it drops: bytes (the profile's `queue: 64KB`) or
/// packets (`queue: 100 packets`, as router and netem queues count).
public enum QueueLimit: Sendable, Equatable {
    case bytes(ByteCount)
    case packets(Int)
}
