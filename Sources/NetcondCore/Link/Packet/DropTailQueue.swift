import DequeModule

/// The bottleneck of one direction for whole packets: a FIFO served at the link rate that drops
/// arrivals at its tail while it is full.
///
/// ```
///  arrives t ──▶ [ p3 p2 p1 ] ──rate──▶ p1 leaves at max(t, when the one before left) + size·8/rate
///                 full (bytes, or packets): the arrival is dropped
/// ```
/// A packet counts against the limit from its arrival until it has left the link (the one being
/// serialized included), as in a router's transmit queue. Without a rate nothing waits and
/// nothing is dropped.
struct DropTailQueue {
    private(set) var rate: Bandwidth?
    private(set) var limit: QueueLimit
    /// Packets not yet gone, in order: when each leaves, and its size.
    private var waiting = Deque<(departure: Instant, bytes: Int)>()
    private var waitingBytes = 0
    private var lastDeparture = Instant.zero

    init(rate: Bandwidth?, limit: QueueLimit) {
        self.rate = rate
        self.limit = limit
    }

    /// A new rate and limit for packets that arrive from now on (those already queued leave as
    /// they were scheduled).
    mutating func reconfigure(rate: Bandwidth?, limit: QueueLimit) {
        self.rate = rate
        self.limit = limit
    }

    /// Bytes and packets queued at `now` (those not yet gone from the link).
    mutating func occupancy(at now: Instant) -> (bytes: Int, packets: Int) {
        while let first = self.waiting.first, first.departure <= now {
            self.waiting.removeFirst()
            self.waitingBytes -= first.bytes
        }
        return (self.waitingBytes, self.waiting.count)
    }

    /// When a packet of `bytes` arriving at `now` has left the link, or nil when the queue is full
    /// and it is dropped.
    mutating func admit(bytes: Int, at now: Instant) -> Instant? {
        guard let rate = self.rate else { return now }
        let (queuedBytes, queuedPackets) = self.occupancy(at: now)
        switch self.limit {
        case .bytes(let limit):
            if queuedBytes + bytes > limit.bytes && queuedPackets > 0 { return nil }
        case .packets(let limit):
            if queuedPackets >= limit { return nil }
        }
        let departure = max(now, self.lastDeparture) + rate.transmissionTime(bytes: Int64(bytes))
        self.lastDeparture = departure
        self.waiting.append((departure, bytes))
        self.waitingBytes += bytes
        return departure
    }
}

/// How much a bottleneck queue holds before it drops: bytes (the profile's `queue: 64KB`) or
/// packets (`queue: 100 packets`, as router and netem queues count).
public enum QueueLimit: Sendable, Equatable {
    case bytes(ByteCount)
    case packets(Int)
}
