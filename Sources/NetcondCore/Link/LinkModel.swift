import DequeModule
import HeapModule

/// The stream engine's link: an emulated TCP sender per connection and direction, whose segments
/// cross the same ``LinkPath`` the packet engine drives (one per direction, shared by every
/// connection of the run), in virtual time.
///
/// The model is pure: it reads no clock and no global randomness. A driver (the proxy on its event
/// loop, or a test) tells it when bytes are offered (`send`) and asks what has arrived by a given
/// instant (`advance`), then sleeps until `nextEventTime`. Each direction:
///
/// ```
///  send ─▶ sender window ─▶ LinkPath (outage gate, loss, bottleneck queue, rate, per-connection
///          (slow start,      pacer, delay line: a segment's fate) ─▶ in-order delivery
///           cubic / bbr)                                             (head-of-line: a lost segment
///                ▲                                                    holds later ones)
///                └──────────── acknowledgements after the reverse latency ◀─────┘
/// ```
/// What only a proxy needs lives here: a proxy cannot drop bytes of a TCP stream, so the model
/// turns the application's bytes into segments (what the real sender would send, at most its
/// window) and repairs the ones the path drops as TCP repairs them: when three later segments of
/// the connection have arrived, the duplicate acknowledgements reach the sender one reverse
/// latency later and it retransmits (fast retransmit, about one round trip late); otherwise — the
/// tail of a burst or of the flow — its retransmission timer fires (RTO = srtt + max(4·rttvar,
/// 200 ms), doubling on each timeout of the same segment). Retransmissions cross the same path and
/// can be lost again. A corrupted segment is discarded by its receiver: lost.
///
/// Simplifications, documented in Docs/link-model.md: acknowledgements cost no bandwidth and are never
/// lost; they take the reverse direction's delay in force when they leave.
public final class LinkModel {
    /// The profile in force: the one the model was made with, or the last one switched to.
    public internal(set) var profile: Profile
    /// The conditions in force now: the profile's own, or those of the current schedule phase.
    public internal(set) var conditions: LinkConditions
    /// True while the link changes nothing (no delay, rate, loss, set-up cost, outage or stall): a
    /// driver may then relay a connection's bytes without the model, as long as none of that
    /// connection's earlier bytes are still held (so nothing is reordered).
    public internal(set) var isTransparent = false
    public let seed: UInt64

    /// Largest receive window a connection advertises; bounds bytes in flight (and memory).
    public static let receiveWindow = 4 * 1024 * 1024
    /// Size of one unit on a direction with no rate limit and no loss (nothing to segment for).
    static let unlimitedUnit = 64 * 1024
    /// Linux: initial SYN timeout 1 s, 6 retries (net.ipv4.tcp_syn_retries), so 127 s in all.
    static let synRetries = 6
    static let minRTO = Span.milliseconds(200)
    static let maxRTO = Span.seconds(120)

    public private(set) var now: Instant = .zero
    public internal(set) var counters = LinkCounters()
    /// The device's radio as the access link's units drove it (nil: the profile has no `radio:`).
    public var radio: RadioModel? { self.links.radio }

    private var events = Heap<ScheduledEvent>()
    private var eventOrder: UInt64 = 0
    var flows: [FlowID: Flow] = [:]
    /// Connection attempts so far (for `connect_hold`'s first N).
    var connectAttempts = 0
    private var nextFlowIndex: UInt64 = 0
    /// The access link's paths, shared by every connection, and each route's behind them, as the
    /// packet engine's.
    var links: LinkNetwork<SegmentRef, FlowID>
    /// How each direction's senders cut bytes into segments (up, down).
    var shapes: [SegmentShape]
    /// Told of every unit a path delivers, before the receiver takes it (the cross-engine test
    /// watches the paths through it).
    var onPathDelivery: ((Direction, PathDelivery<SegmentRef>) -> Void)?
    /// Told of every unit a route's path dropped after its first path carried it (the cross-engine
    /// test watches them).
    var onDropBeyond: ((Direction, SegmentRef) -> Void)?
    var pendingDeliveries: [Delivery] = []
    var pendingNotices: [LinkNotice] = []
    /// Time-varying conditions: schedule phase, outages and stalls (see `LinkModel+Conditions.swift`).
    var timeline: ConditionTimeline
    /// The outage the link applies (the timeline's, as of the last refresh).
    var outageInForce: OutageBehaviour?
    var lastState: LinkState?
    /// When the timeline tick already scheduled fires (nil: none).
    var scheduledTimelineTick: Instant?
    /// When the routes' tick already scheduled fires (nil: none).
    var scheduledRouteTick: Instant?
    /// Connection attempts so far per route (for a route's `connect_hold`).
    var routeAttempts: [Int: Int] = [:]
    /// A handover under way: when its gap ends, and the profile the device is then on.
    var handoverEnds: (at: Instant, profile: Profile)?
    /// Connections that took each route so far (by path index).
    public internal(set) var routeConnections: [Int: Int] = [:]

    public init(profile: Profile, seed: UInt64) {
        self.profile = profile
        self.conditions = profile.conditions
        self.seed = seed
        self.timeline = ConditionTimeline(profile: profile, seed: seed)
        self.links = LinkNetwork(access: self.timeline, routes: profile.routes, seed: seed)
        let conditions = self.conditions
        self.shapes = Direction.allCases.map { SegmentShape(conditions.direction($0), mss: Int(profile.mss.bytes)) }
        self.refresh()
        self.scheduleTimelineTick()
        self.scheduleRouteTick()
    }

    // MARK: - Driver interface

    /// Opens a connection. It may send at once unless `hold` or `connect` says otherwise.
    public func openFlow(at now: Instant) -> FlowID {
        self.catchUp(to: now)
        let index = self.nextFlowIndex
        self.nextFlowIndex += 1
        let id = FlowID(rawValue: index)
        let flow = Flow(id: id, model: self, now: self.now)
        self.flows[id] = flow
        self.counters.connections += 1
        return id
    }

    /// Nothing is sent on this connection (either direction) before `until`.
    public func hold(_ id: FlowID, until: Instant) {
        guard let flow = self.flows[id] else { return }
        flow.up.readyAt = max(flow.up.readyAt, until)
        flow.down.readyAt = max(flow.down.readyAt, until)
    }

    /// Forgets a connection. Segments already on the link still occupy it but are not delivered.
    public func closeFlow(_ id: FlowID) {
        self.flows.removeValue(forKey: id)
    }

    /// The application at one end wrote `bytes` bytes at `now`.
    public func send(_ id: FlowID, _ direction: Direction, bytes: Int, at now: Instant) {
        precondition(bytes >= 0)
        self.catchUp(to: now)
        guard bytes > 0, let flow = self.flows[id] else { return }
        let side = flow.side(direction)
        side.unsent += bytes
        side.backlog += bytes
        self.trySend(flow, side)
    }

    /// What happened to connections and to the link's state since the last call (connection
    /// outcomes, resets, phase changes), in order.
    public func takeNotices() -> [LinkNotice] {
        let notices = self.pendingNotices
        self.pendingNotices.removeAll(keepingCapacity: true)
        return notices
    }

    /// Processes everything that happens up to `now` and returns the bytes delivered, in order.
    public func advance(to now: Instant) -> [Delivery] {
        self.catchUp(to: now)
        if self.pendingDeliveries.isEmpty { return [] }
        let deliveries = self.pendingDeliveries
        self.pendingDeliveries.removeAll(keepingCapacity: true)
        return deliveries
    }

    /// When something next happens, or nil when the link is idle.
    public var nextEventTime: Instant? {
        Instant.earliest(self.events.min?.time, self.links.nextDelivery)
    }

    /// Bytes sent on this connection and direction that have not been delivered yet.
    public func backlog(_ id: FlowID, _ direction: Direction) -> Int {
        self.flows[id]?.side(direction).backlog ?? 0
    }

    /// Bytes the emulated sender has not put on the link yet (its socket buffer).
    public func unsent(_ id: FlowID, _ direction: Direction) -> Int {
        self.flows[id]?.side(direction).unsent ?? 0
    }

    /// Smallest and largest size of the emulated sender's socket buffer (Linux's `tcp_wmem`
    /// default and maximum).
    public static let minimumSendBuffer = 64 * 1024
    public static let maximumSendBuffer = 4 * 1024 * 1024

    /// How many unsent bytes the emulated sender's socket buffer holds before the application
    /// writing into it (the proxy, reading the real sender) is held back. Linux auto-tunes it to
    /// twice the congestion window (`tcp_sndbuf_expand`), so a bulk sender always has a window's
    /// worth waiting: a driver that runs late (its loop held up for tens of milliseconds) finds
    /// the link still busy, instead of an idle link and then a window-sized burst that overflows
    /// the queue.
    public func sendBuffer(_ id: FlowID, _ direction: Direction) -> Int {
        guard let side = self.flows[id]?.side(direction) else { return Self.minimumSendBuffer }
        return Self.sendBuffer(congestionWindow: side.window.cwnd)
    }

    static func sendBuffer(congestionWindow cwnd: Double) -> Int {
        min(max(Int(2 * cwnd), Self.minimumSendBuffer), Self.maximumSendBuffer)
    }

    /// True while the emulated sender's socket buffer has room: its application may write.
    public func senderHasRoom(_ id: FlowID, _ direction: Direction) -> Bool {
        guard let side = self.flows[id]?.side(direction) else { return true }
        return side.unsent < Self.sendBuffer(congestionWindow: side.window.cwnd)
    }

    /// The emulated sender's congestion window, in bytes (for tests and status).
    public func congestionWindow(_ id: FlowID, _ direction: Direction) -> Int {
        Int(self.flows[id]?.side(direction).window.cwnd ?? 0)
    }

    // MARK: - Event loop

    /// Processes, in time order, every event and every arrival from the paths due by `target`
    /// (at one instant, arrivals first).
    func catchUp(to target: Instant) {
        while true {
            let event = self.events.min?.time
            if let arrival = self.links.nextDelivery, arrival <= target, event.map({ arrival <= $0 }) ?? true {
                if arrival > self.now { self.now = arrival }
                switch self.links.popEvent(upTo: arrival) {
                case .delivered(let direction, let delivery): self.segmentArrived(delivery, direction)
                case .dropped(let direction, let segment, let why): self.droppedBeyond(segment, direction, why)
                case nil: break
                }
                continue
            }
            guard let time = event, time <= target else { break }
            let next = self.events.removeMin()
            if next.time > self.now { self.now = next.time }
            self.handle(next.kind)
        }
        if target > self.now { self.now = target }
    }

    func schedule(_ kind: EventKind, at time: Instant) {
        self.eventOrder += 1
        self.events.insert(ScheduledEvent(time: max(time, self.now), order: self.eventOrder, kind: kind))
    }

    private func handle(_ kind: EventKind) {
        switch kind {
        case .ack(let id, let direction, let seq, let bytes, let rttSample):
            guard let flow = self.flows[id] else { return }
            self.ack(flow, flow.side(direction), seq: seq, bytes: bytes, rttSample: rttSample)
        case .lossDetected(let id, let direction, let seq, let generation):
            guard let flow = self.flows[id] else { return }
            self.repair(flow, flow.side(direction), seq: seq, generation: generation, byTimeout: false)
        case .timeout(let id, let direction, let seq, let generation):
            guard let flow = self.flows[id] else { return }
            self.repair(flow, flow.side(direction), seq: seq, generation: generation, byTimeout: true)
        case .wake(let id, let direction):
            guard let flow = self.flows[id] else { return }
            let side = flow.side(direction)
            side.wakeAt = nil
            self.trySend(flow, side)
        case .synAttempt(let id, let attempt):
            guard let flow = self.flows[id] else { return }
            self.synAttempt(flow, attempt: attempt)
        case .connectResult(let id, let outcome):
            guard let flow = self.flows[id] else { return }
            self.connectResult(flow, outcome)
        case .timelineTick:
            self.timelineTick()
        case .routeTick:
            self.routeTick()
        case .handoverEnds:
            self.endHandover()
        }
    }

    func index(_ direction: Direction) -> Int { direction == .up ? 0 : 1 }

    /// One direction's rate, delay and loss in force at `now` (a trace's or a step series' value
    /// of the moment), with the timeline's outage or stall.
    public func moment(_ direction: Direction, at now: Instant) -> LinkMoment {
        self.timeline.moment(direction, at: now)
    }

    /// How long a byte queued at `now` would wait at the direction's bottleneck before it goes:
    /// what is being sent, then every byte queued ahead of it, at the link rate (zero without one).
    public func queueingDelay(_ direction: Direction) -> Span {
        self.links.access[direction].queueingDelay(at: self.now)
    }

    // MARK: - Sender

    func trySend(_ flow: Flow, _ side: FlowSide) {
        if self.now < side.readyAt {
            self.wake(flow, side, at: side.readyAt)
            return
        }
        let shape = self.shapes[self.index(side.direction)]
        while side.unsent > 0 {
            // Units are up to 64 KB where nothing is decided per segment, but the window counts
            // real segments (slow start begins at 10 of them): a unit never exceeds the room left.
            let room = max(Int(side.window.allowance) - side.inflight, shape.mss)
            let size = min(shape.unitSize, side.unsent, room)
            if side.inflight > 0 && Double(side.inflight + size) > side.window.allowance { break }
            // The receiver buffers what arrived behind a hole; its window bounds everything sent
            // but not yet delivered in order (and so the memory a connection can hold).
            let undelivered = side.backlog - side.unsent
            if undelivered > 0 && undelivered + size > Self.receiveWindow { break }
            if let cap = side.capRate {
                // BBR paces its segments at the rate it measures (the path's): a segment is sent
                // only once the one before has had its time on the wire at that rate.
                if let release = side.capReleaseAt {
                    if self.now < release {
                        self.wake(flow, side, at: release)
                        break
                    }
                    side.capReleaseAt = nil
                } else {
                    let release = self.now + cap.transmissionTime(bytes: Int64(size + shape.overhead))
                    side.capReleaseAt = release
                    self.wake(flow, side, at: release)
                    break
                }
            }
            let seq = side.nextSeq
            side.nextSeq += 1
            side.records.append(SegmentRecord(size: size, sentAt: self.now))
            side.unsent -= size
            side.inflight += size
            self.transmit(flow, side, seq: seq)
        }
    }

    private func wake(_ flow: Flow, _ side: FlowSide, at time: Instant) {
        if let pending = side.wakeAt, pending <= time { return }
        side.wakeAt = time
        self.schedule(.wake(flow.id, side.direction), at: time)
    }

    /// Puts a transmission of segment `seq` on the direction's path; a drop is repaired as TCP would.
    func transmit(_ flow: Flow, _ side: FlowSide, seq: UInt64) {
        self.counters[side.direction].segmentsSent += 1
        let index = self.index(side.direction)
        let record = side.record(seq)
        let unit = SegmentRef(flow: flow.id, seq: seq, generation: record.generation)
        let wireBytes = record.size + self.shapes[index].overhead
        if flow.stranded {  // the network it was on is gone: nothing of it is carried
            self.counters[side.direction].outageDrops += 1
            return self.markLost(flow, side, seq: seq)
        }
        guard
            case .dropped(let why) = self.links.offer(
                unit, side.direction, route: flow.route, bytes: wireBytes, connection: flow.id, at: self.now)
        else { return }
        self.count(why, side.direction)
        self.markLost(flow, side, seq: seq)
    }

    private func count(_ drop: PathDrop, _ direction: Direction) {
        switch drop {
        case .outage: self.counters[direction].outageDrops += 1
        case .lost: self.counters[direction].segmentsLost += 1
        case .queueFull, .aqm, .connectionQueueFull: self.counters[direction].queueDrops += 1
        }
    }

    /// A route's path dropped a segment after the access link carried it (or before the access
    /// link took it, down): lost, as a drop on the access link is, unless it was sent again since.
    private func droppedBeyond(_ segment: SegmentRef, _ direction: Direction, _ why: PathDrop) {
        self.onDropBeyond?(direction, segment)
        self.count(why, direction)
        guard !segment.isHandshake, let flow = self.flows[segment.flow] else { return }
        let side = flow.side(direction)
        guard side.hasRecord(segment.seq), side.record(segment.seq).state == .inFlight,
            side.record(segment.seq).generation == segment.generation
        else { return }
        self.markLost(flow, side, seq: segment.seq)
    }

    /// A segment reached the far end of its path: the receiver takes it, unless it is a copy
    /// (TCP drops a duplicate) or corrupted (its checksum fails: lost).
    private func segmentArrived(_ delivery: PathDelivery<SegmentRef>, _ direction: Direction) {
        self.onPathDelivery?(direction, delivery)
        let segment = delivery.unit
        if segment.isHandshake { return self.handshakeArrived(delivery, direction) }
        guard !delivery.isCopy, let flow = self.flows[segment.flow], !flow.stranded else { return }
        let side = flow.side(direction)
        guard delivery.corruptByte != nil else {
            return self.arrive(flow, side, seq: segment.seq, generation: segment.generation)
        }
        guard side.hasRecord(segment.seq), side.record(segment.seq).state == .inFlight,
            side.record(segment.seq).generation == segment.generation
        else { return }
        self.counters[direction].segmentsLost += 1
        self.markLost(flow, side, seq: segment.seq)
    }

    // MARK: - State

    func makeSide(_ direction: Direction, flowIndex: UInt64, now: Instant) -> FlowSide {
        let spec = self.conditions.direction(direction)
        let window = SenderWindow(
            algorithm: self.profile.tcp,
            mss: self.shapes[self.index(direction)].mss,
            receiveWindow: Self.receiveWindow,
            bandwidth: spec.pathRate,
            baseRTT: self.conditions.roundTrip(from: now)
        )
        return FlowSide(
            direction: direction,
            window: window,
            capRate: self.capRate(for: spec, tcp: self.profile.tcp),
            tcp: self.profile.tcp,
            readyAt: now,
            ackSeed: SeedDeriver.derive(self.seed, 0x4143_4B4A, flowIndex, direction == .up ? 0 : 1)
        )
    }

    /// The rate a connection's own sender paces at: for BBR (which paces at the bottleneck rate it
    /// measures instead of bursting its window into the queue) the path's rate; cubic and reno do
    /// not pace (a per-connection cap is the path's, ``LinkDirection/connectionBandwidth``).
    func capRate(for spec: LinkDirection, tcp: CongestionControl) -> Bandwidth? {
        tcp == .bbr ? spec.pathRate : nil
    }
}

// MARK: - Internal state

struct ScheduledEvent: Comparable {
    var time: Instant
    var order: UInt64
    var kind: EventKind

    static func < (lhs: ScheduledEvent, rhs: ScheduledEvent) -> Bool {
        if lhs.time != rhs.time { return lhs.time < rhs.time }
        return lhs.order < rhs.order
    }

    static func == (lhs: ScheduledEvent, rhs: ScheduledEvent) -> Bool {
        lhs.time == rhs.time && lhs.order == rhs.order
    }
}

enum EventKind {
    case ack(FlowID, Direction, seq: UInt64, bytes: Int, rttSample: Span?)
    case lossDetected(FlowID, Direction, seq: UInt64, generation: Int)
    case timeout(FlowID, Direction, seq: UInt64, generation: Int)
    case wake(FlowID, Direction)
    case synAttempt(FlowID, attempt: Int)
    case connectResult(FlowID, ConnectOutcome)
    case timelineTick
    /// A route's timeline changes now.
    case routeTick
    /// A handover's gap ends now: the new network is up.
    case handoverEnds
}
