/// One direction of the packet engine's link: what happens to each whole packet, in virtual time.
///
/// ```
///  offer ─▶ loss ─▶ drop-tail queue ─▶ serialization ─▶ delay line ─▶ deliver (+ a duplicate)
///          (Bernoulli or  (bytes or      (link rate)      (latency + jitter; or Reordering: held
///           Gilbert–       packets)                         back `reorderGap`, holding none of
///           Elliott)                                        the others)
/// ```
/// The link decides a packet's fate when it is offered and returns it; the driver (the packet
/// engine, or a test) holds the packet until then. It reads no clock: `now` is a parameter, and
/// every random decision comes from its own seeded stream, so the same seed and the same packets
/// give the same fates. No emulated TCP sender here: the packets are a real stack's.
public struct PacketLink {
    public private(set) var impairments: PacketImpairments
    private var loss: LossProcess
    private var queue: DropTailQueue
    private var delay: DelayLine
    private var random: SeededRandom
    public private(set) var counters = PacketCounters()

    public init(_ impairments: PacketImpairments, seed: UInt64) {
        self.impairments = impairments
        self.loss = LossProcess(spec: impairments.loss, seed: seed &+ 1)
        self.queue = DropTailQueue(rate: impairments.rate, limit: impairments.queue, discipline: impairments.aqm)
        self.delay = DelayLine(latency: impairments.latency, jitter: impairments.jitter, seed: seed &+ 2)
        self.random = SeededRandom(seed: seed &+ 3)
    }

    /// New conditions for packets offered from now on; packets already on the link keep their fate.
    public mutating func reconfigure(_ impairments: PacketImpairments) {
        self.impairments = impairments
        self.loss.reconfigure(impairments.loss)
        self.queue.reconfigure(rate: impairments.rate, limit: impairments.queue, discipline: impairments.aqm)
        self.delay.reconfigure(latency: impairments.latency, jitter: impairments.jitter)
    }

    /// What becomes of a packet of `bytes` offered at `now`: dropped, or delivered at a moment
    /// (twice when duplicated; possibly with a byte to corrupt).
    public mutating func offer(bytes: Int, at now: Instant) -> [PacketFate] {
        let fate = self.decide(bytes: bytes, at: now)
        return [fate.fate] + (fate.duplicate.map { [$0] } ?? [])
    }

    /// ``offer(bytes:at:)`` without an array: the fate, and the duplicate's when there is one (the
    /// packet engine calls this for every packet).
    public mutating func decide(bytes: Int, at now: Instant) -> (fate: PacketFate, duplicate: PacketFate?) {
        self.counters.offered += 1
        if self.loss.nextIsLost() {
            self.counters.lost += 1
            return (.dropped(.lost), nil)
        }
        let departure: Instant
        switch self.queue.admit(bytes: bytes, at: now) {
        case .departs(let moment):
            departure = moment
        case .full:
            self.counters.queueDrops += 1
            return (.dropped(.queueFull), nil)
        case .aqm:
            self.counters.aqmDrops += 1
            return (.dropped(.aqm), nil)
        }
        let arrival: Instant
        let i = self.impairments
        if let late = Reordering(chance: i.reorder, gap: i.reorderGap)
            .heldBack(departingAt: departure, latency: i.latency, random: &self.random)
        {
            arrival = late
            self.counters.reordered += 1
        } else {
            arrival = self.delay.arrival(departingAt: departure)
        }
        var corrupt: Int?
        if i.corrupt.value > 0 && bytes > 0 && self.random.chance(i.corrupt.value) {
            corrupt = Int(self.random.next() % UInt64(bytes))
            self.counters.corrupted += 1
        }
        var duplicate: PacketFate?
        if i.duplicate.value > 0 && self.random.chance(i.duplicate.value) {
            duplicate = .deliver(at: arrival, corruptByte: nil)
            self.counters.duplicated += 1
        }
        return (.deliver(at: arrival, corruptByte: corrupt), duplicate)
    }
}

/// What the packet link does to one direction's packets.
public struct PacketImpairments: Sendable, Equatable {
    public var latency: Span
    /// Extra delay per packet, uniform in 0...jitter; never reorders (reordering is `reorder`).
    public var jitter: Span
    /// The link rate; nil = unlimited (then nothing queues).
    public var rate: Bandwidth?
    public var queue: QueueLimit
    public var loss: LossSpec
    /// Probability that a packet is held back `reorderGap` and overtaken by the ones behind it.
    public var reorder: Probability
    public var reorderGap: Span
    /// Probability that a packet arrives twice.
    public var duplicate: Probability
    /// Probability that one byte of a packet arrives changed (the driver flips it).
    public var corrupt: Probability
    public var aqm: QueueDiscipline

    public init(
        latency: Span = .zero, jitter: Span = .zero, rate: Bandwidth? = nil,
        queue: QueueLimit = .bytes(LinkDirection.defaultQueue), loss: LossSpec = .none,
        reorder: Probability = .zero, reorderGap: Span = .milliseconds(10),
        duplicate: Probability = .zero, corrupt: Probability = .zero, aqm: QueueDiscipline = .dropTail
    ) {
        self.aqm = aqm
        self.latency = latency
        self.jitter = jitter
        self.rate = rate
        self.queue = queue
        self.loss = loss
        self.reorder = reorder
        self.reorderGap = reorderGap
        self.duplicate = duplicate
        self.corrupt = corrupt
    }

    /// A profile's direction as the packet link sees it: the same latency, jitter, rate (the
    /// per-connection cap is the stream engine's), queue and loss, and the packet-only keys.
    public init(_ direction: LinkDirection) {
        self.init(
            latency: direction.latency, jitter: direction.jitter, rate: direction.bandwidth,
            queue: direction.queuePackets.map { .packets($0) } ?? .bytes(direction.queue), loss: direction.loss,
            reorder: direction.reorder, reorderGap: direction.reorderGap, duplicate: direction.duplicate,
            corrupt: direction.corrupt, aqm: direction.aqm)
    }
}

/// The fate of one packet offered to the link.
public enum PacketFate: Sendable, Equatable {
    case dropped(PacketDrop)
    /// Delivered at this moment; `corruptByte`: the offset of a byte to change on the way.
    case deliver(at: Instant, corruptByte: Int?)
}

public enum PacketDrop: Sendable, Equatable {
    /// The loss process took it.
    case lost
    /// The bottleneck queue was full.
    case queueFull
    /// CoDel dropped it at the head of the queue.
    case aqm
}

/// What one direction of the packet link did, for the summary and `GET /status`.
public struct PacketCounters: Sendable, Equatable {
    public var offered = 0
    public var lost = 0
    public var queueDrops = 0
    public var aqmDrops = 0
    public var reordered = 0
    public var duplicated = 0
    public var corrupted = 0
}
