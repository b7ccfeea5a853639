import DequeModule

/// How the senders of one direction cut bytes into segments.
struct SegmentShape {
    let mss: Int
    /// Payload bytes per unit: the MSS where segmentation matters, a large chunk otherwise.
    let unitSize: Int
    /// Header bytes counted on the link per unit.
    let overhead: Int

    init(_ spec: LinkDirection, mss: Int) {
        let segmented =
            spec.bandwidth != nil || spec.trace != nil || spec.series != nil || spec.connectionBandwidth != nil
            || spec.loss != .none
            || spec.queuePackets != nil || spec.aqm != .dropTail || spec.duplicate > .zero || spec.corrupt > .zero
        self.mss = mss
        self.unitSize = segmented ? mss : LinkModel.unlimitedUnit
        self.overhead = segmented ? Int(Profile.headerOverhead.bytes) : 0
    }
}

/// One transmission of a segment on its way across a path.
struct SegmentRef {
    var flow: FlowID
    var seq: UInt64
    /// The transmission's generation (a retransmission is a new one; an older one's arrival is ignored);
    /// for a handshake packet, the number of the SYN it is or answers.
    var generation: Int
    /// A SYN (up) or a SYN-ACK (down) of the connection's set-up, not a data segment.
    var isHandshake = false
}

final class Flow {
    let id: FlowID
    let up: FlowSide
    let down: FlowSide
    /// The firewall drops this connection's SYNs (`otherwise: blackhole`).
    var firewalled = false
    /// Between `connect` and its outcome.
    var settingUp = false
    /// The number of the latest SYN sent (0: the first; so also how many were retransmitted).
    var synAttempt = 0
    /// A SYN of this connection reached (or is sure to reach) the server: the driver was told.
    var serverReached = false
    /// The route it takes beyond the access link (nil: none), decided when it connects.
    var route: Int?
    /// A handover left it on the network the device left: nothing of it is carried any more,
    /// either way, and neither end is told.
    var stranded = false

    init(id: FlowID, model: LinkModel, now: Instant) {
        self.id = id
        self.up = model.makeSide(.up, flowIndex: id.rawValue, now: now)
        self.down = model.makeSide(.down, flowIndex: id.rawValue, now: now)
    }

    func side(_ direction: Direction) -> FlowSide {
        direction == .up ? self.up : self.down
    }
}

/// One direction of one connection: the sender's window and buffers, the receiver's reassembly.
final class FlowSide {
    let direction: Direction
    var window: SenderWindow
    var capRate: Bandwidth?
    let tcp: CongestionControl
    /// When the segment now crossing the per-connection cap has crossed it.
    var capReleaseAt: Instant?
    var readyAt: Instant
    var wakeAt: Instant?
    /// Offered by the application, not yet on the link.
    var unsent = 0
    /// Offered and not yet delivered.
    var backlog = 0
    /// Bytes the sender believes are in the network.
    var inflight = 0
    var nextSeq: UInt64 = 0
    /// Sequence number of `records.first`.
    var baseSeq: UInt64 = 0
    var records = Deque<SegmentRecord>()
    /// Sequence numbers of lost transmissions not yet repaired, ascending.
    var lostSeqs: [UInt64] = []
    /// Highest sequence number sent when the current loss recovery began.
    var recoveryEnd: UInt64?
    var smoothedRTT: Span?
    var rttVariance = Span.zero
    /// When the sender last received an acknowledgement (restarts the retransmission timer).
    var lastAckAt: Instant?
    /// The acknowledgements' way back: the reverse direction's jitter, drawn from a stream of the
    /// side's own, and when the latest one reaches the sender (one never overtakes another).
    var ackJitter: SeededRandom
    var latestAckArrival = Instant.zero

    init(
        direction: Direction,
        window: SenderWindow,
        capRate: Bandwidth?,
        tcp: CongestionControl,
        readyAt: Instant,
        ackSeed: UInt64
    ) {
        self.ackJitter = SeededRandom(seed: ackSeed)
        self.direction = direction
        self.window = window
        self.capRate = capRate
        self.tcp = tcp
        self.readyAt = readyAt
    }

    func hasRecord(_ seq: UInt64) -> Bool {
        seq >= self.baseSeq && seq < self.baseSeq + UInt64(self.records.count)
    }

    func record(_ seq: UInt64) -> SegmentRecord {
        self.records[Int(seq - self.baseSeq)]
    }

    func setRecord(_ seq: UInt64, _ record: SegmentRecord) {
        self.records[Int(seq - self.baseSeq)] = record
    }

    /// Up to `jitter` more on an acknowledgement's way back (none drawn without jitter: a link
    /// without it keeps its timing whatever the stream).
    func drawAckJitter(_ jitter: Span) -> Span {
        guard jitter > .zero else { return .zero }
        return Span(nanoseconds: Int64(self.ackJitter.nextUnit() * Double(jitter.nanoseconds)))
    }

    /// RFC 6298 estimator.
    func updateRTT(_ sample: Span) {
        guard let srtt = self.smoothedRTT else {
            self.smoothedRTT = sample
            self.rttVariance = Span(nanoseconds: sample.nanoseconds / 2)
            return
        }
        let error = Span(nanoseconds: abs(srtt.nanoseconds - sample.nanoseconds))
        self.rttVariance = Span(nanoseconds: (3 * self.rttVariance.nanoseconds + error.nanoseconds) / 4)
        self.smoothedRTT = Span(nanoseconds: (7 * srtt.nanoseconds + sample.nanoseconds) / 8)
    }

    /// RTO as Linux computes it: srtt + max(4·rttvar, 200 ms); 1 s before the first sample.
    var retransmissionTimeout: Span {
        guard let srtt = self.smoothedRTT else { return .seconds(1) }
        return srtt + max(self.rttVariance * 4, LinkModel.minRTO)
    }
}

struct SegmentRecord {
    enum State: Equatable {
        case inFlight
        case arrived
        /// Lost; `dupacks` later transmissions have arrived since; `detectable` until detection is scheduled.
        case lost(dupacks: Int, detectable: Bool)
    }

    var size: Int
    /// When the latest transmission left the sender.
    var sentAt: Instant
    var state = State.inFlight
    var arrivedAt = Instant.zero
    var retransmitted = false
    var timeouts = 0
    /// Bumped on every retransmission so that events about an older transmission are ignored.
    var generation = 0

    init(size: Int, sentAt: Instant) {
        self.size = size
        self.sentAt = sentAt
    }
}
