import DequeModule
import HeapModule

/// One emulated access link, shared by every connection of a run, in virtual time.
///
/// The model is pure: it reads no clock and no global randomness. A driver (the proxy on its event
/// loop, or a test) tells it when bytes are offered (`send`) and asks what has arrived by a given
/// instant (`advance`), then sleeps until `nextEventTime`. Each direction is a pipeline:
///
/// ```
///  send ─▶ sender window ─▶ bottleneck FIFO ─▶ serialization ─▶ loss ─▶ delay line ─▶ in-order delivery
///          (slow start,     (shared, drop-tail  (link rate,     (per     (latency +     (head-of-line:
///           cubic / bbr)     at `queue` bytes)   +40 B/segment)  segment)  jitter)       a lost segment
///                ▲                                                                        holds later ones)
///                └──────────── acknowledgements after the reverse latency ◀──────────────┘
/// ```
/// A lost segment is repaired as TCP repairs it: when three later segments of the connection have
/// arrived, the duplicate acknowledgements reach the sender one reverse latency later and it
/// retransmits (fast retransmit, about one round trip late); otherwise — the tail of a burst or of
/// the flow — its retransmission timer fires (RTO = srtt + max(4·rttvar, 200 ms), doubling on each
/// timeout of the same segment). Retransmissions pass through the same link and can be lost again.
///
/// Simplifications, documented in the README: acknowledgements cost no bandwidth and are never
/// lost; a retransmission may exceed the queue limit (it is never dropped by the queue).
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

    private var events = Heap<ScheduledEvent>()
    private var eventOrder: UInt64 = 0
    var flows: [FlowID: Flow] = [:]
    /// Connection attempts so far (for `connect_hold`'s first N).
    var connectAttempts = 0
    private var nextFlowIndex: UInt64 = 0
    let upLink: BottleneckLink
    let downLink: BottleneckLink
    private var pendingDeliveries: [Delivery] = []
    var pendingNotices: [LinkNotice] = []
    /// Time-varying conditions: schedule phase, outages and stalls (see `LinkModel+Conditions.swift`).
    var timeline: ConditionTimeline
    /// The outage the link applies (the timeline's, as of the last refresh).
    var outageInForce: OutageBehaviour?
    var lastState: LinkState?
    /// When the timeline tick already scheduled fires (nil: none).
    var scheduledTimelineTick: Instant?

    public init(profile: Profile, seed: UInt64) {
        self.profile = profile
        self.conditions = profile.conditions
        self.seed = seed
        self.upLink = BottleneckLink(direction: .up, spec: profile.up, mss: Int(profile.mss.bytes))
        self.downLink = BottleneckLink(direction: .down, spec: profile.down, mss: Int(profile.mss.bytes))
        self.timeline = ConditionTimeline(profile: profile, seed: seed)
        self.refresh()
        self.scheduleTimelineTick()
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

    /// Emulates the connection set-up: DNS delay for names, the connect delay, then a SYN / SYN-ACK
    /// round trip that can be lost and retried after 1 s, 2 s, 4 s … (6 retries, 127 s in all, as
    /// Linux does). Nothing is sent on the flow until it is established. The outcome arrives as a
    /// `LinkNotice` (`established`, `refused` during a `refuse`/`reset` outage, or `timedOut`) from
    /// `takeNotices()` at the instant it happens.
    ///
    /// The profile's set-up rules come first: a name in `dns_fail` fails after the DNS delay
    /// (`nameNotResolved`), a port the firewall does not allow is refused one round trip later
    /// (`refusedByFirewall`) or blackholed, and the first connections may be held before their
    /// handshake starts (`connect_hold`).
    /// `intercept` (a captive portal's) replaces the profile's verdict. Returns the verdict, so the
    /// caller knows whether a real connection is worth attempting.
    @discardableResult
    public func connect(
        _ id: FlowID,
        at now: Instant,
        host: String = "",
        port: Int = 80,
        resolvesName: Bool,
        intercept: SetupVerdict? = nil
    ) -> SetupVerdict {
        self.catchUp(to: now)
        let index = self.connectAttempts
        self.connectAttempts += 1
        let verdict = intercept ?? self.profile.setup.verdict(host: host, port: port, isName: resolvesName, index: index)
        guard let flow = self.flows[id] else { return verdict }
        flow.up.readyAt = .distantFuture
        flow.down.readyAt = .distantFuture
        var t = self.now
        if resolvesName { t = t + self.conditions.dnsDelay }
        switch verdict {
        case .nameFails:
            self.counters.setupFailures += 1
            self.schedule(.connectResult(id, .nameNotResolved(at: .zero)), at: t)
        case .refused:
            self.counters.setupFailures += 1
            self.schedule(.connectResult(id, .refusedByFirewall(at: .zero)), at: t + self.conditions.connectDelay + self.conditions.baseRTT)
        case .blackholed:
            self.counters.setupFailures += 1
            flow.firewalled = true
            self.schedule(.synAttempt(id, attempt: 0), at: t + self.conditions.connectDelay)
        case .proceed(let hold):
            self.schedule(.synAttempt(id, attempt: 0), at: t + hold + self.conditions.connectDelay)
        }
        return verdict
    }

    private func synAttempt(_ flow: Flow, attempt: Int) {
        if flow.firewalled { return self.retrySYN(flow, after: attempt) }
        switch self.outageInForce {
        case .refuse, .reset:
            self.schedule(.connectResult(flow.id, .refused(at: .zero)), at: self.now + self.conditions.baseRTT)
            return
        case .blackhole:
            break
        case nil:
            let synLost = flow.setupRandom.chance(self.conditions.up.loss.meanRate)
            let synAckLost = !synLost && flow.setupRandom.chance(self.conditions.down.loss.meanRate)
            if !synLost && !synAckLost {
                self.pendingNotices.append(.handshakeUnderWay(flow.id, at: self.now))
                let result = ConnectOutcome.established(at: .zero, synRetransmits: attempt)
                self.schedule(.connectResult(flow.id, result), at: self.now + self.conditions.baseRTT)
                return
            }
        }
        self.retrySYN(flow, after: attempt)
    }

    /// The SYN (or its SYN-ACK) of this attempt was lost: retry after 1, 2, 4 … s, then give up.
    private func retrySYN(_ flow: Flow, after attempt: Int) {
        let timeout = Span.seconds(1) * Int64(1 << attempt)
        if attempt < Self.synRetries {
            self.schedule(.synAttempt(flow.id, attempt: attempt + 1), at: self.now + timeout)
        } else {
            self.schedule(.connectResult(flow.id, .timedOut(at: .zero)), at: self.now + timeout)
        }
    }

    /// Outcomes are scheduled undated and stamped with the moment they happen.
    private func connectResult(_ flow: Flow, _ outcome: ConnectOutcome) {
        if case .refused = outcome { self.counters.refusedConnections += 1 }
        self.pendingNotices.append(.connected(flow.id, outcome.happening(at: self.now)))
        self.releaseAfterSetUp(flow)
    }

    /// The set-up is over: data moves again. After a failed one too, since the client's side of
    /// the flow lives on and the proxy answers it (502, SOCKS5 reply) over the same emulated link.
    private func releaseAfterSetUp(_ flow: Flow) {
        flow.up.readyAt = self.now
        flow.down.readyAt = self.now
        self.trySend(flow, flow.up)
        self.trySend(flow, flow.down)
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
        self.events.min?.time
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

    func catchUp(to target: Instant) {
        while let top = self.events.min, top.time <= target {
            let event = self.events.removeMin()
            if event.time > self.now { self.now = event.time }
            self.handle(event.kind)
        }
        if target > self.now { self.now = target }
    }

    func schedule(_ kind: EventKind, at time: Instant) {
        self.eventOrder += 1
        self.events.insert(ScheduledEvent(time: max(time, self.now), order: self.eventOrder, kind: kind))
    }

    private func handle(_ kind: EventKind) {
        switch kind {
        case .linkFree(let direction):
            self.linkFree(self.link(direction))
        case .arrive(let id, let direction, let seq, let generation):
            guard let flow = self.flows[id] else { return }
            let link = self.link(direction)
            if link.paused {
                // A stalled direction moves no byte: what reaches the far end waits there.
                link.heldArrivals.append(HeldArrival(flow: id, seq: seq, generation: generation))
                return
            }
            self.arrive(flow, flow.side(direction), seq: seq, generation: generation)
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
        }
    }

    func link(_ direction: Direction) -> BottleneckLink {
        direction == .up ? self.upLink : self.downLink
    }

    /// How long a byte queued at `now` would wait at the direction's bottleneck before it goes:
    /// what is being sent, then every byte queued ahead of it, at the link rate (zero without one).
    public func queueingDelay(_ direction: Direction) -> Span {
        let link = self.link(direction)
        guard let bandwidth = link.bandwidth, bandwidth.bitsPerSecond > 0 else { return .zero }
        let sending = link.busyUntil > self.now ? link.busyUntil - self.now : .zero
        return sending + Span(nanoseconds: Int64(Double(link.queuedBytes) * 8e9 / Double(bandwidth.bitsPerSecond)))
    }

    // MARK: - Sender

    private func trySend(_ flow: Flow, _ side: FlowSide) {
        if self.now < side.readyAt {
            self.wake(flow, side, at: side.readyAt)
            return
        }
        let link = self.link(side.direction)
        while side.unsent > 0 {
            // Units are up to 64 KB where nothing is decided per segment, but the window counts
            // real segments (slow start begins at 10 of them): a unit never exceeds the room left.
            let room = max(Int(side.window.allowance) - side.inflight, link.mss)
            let size = min(link.unitSize, side.unsent, room)
            if side.inflight > 0 && Double(side.inflight + size) > side.window.allowance { break }
            // The receiver buffers what arrived behind a hole; its window bounds everything sent
            // but not yet delivered in order (and so the memory a connection can hold).
            let undelivered = side.backlog - side.unsent
            if undelivered > 0 && undelivered + size > Self.receiveWindow { break }
            if let cap = side.capRate {
                // The per-connection cap is a link of its own in front of the shared one: a segment
                // enters the shared link only once the cap has finished serializing it.
                if let release = side.capReleaseAt {
                    if self.now < release {
                        self.wake(flow, side, at: release)
                        break
                    }
                    side.capReleaseAt = nil
                } else {
                    let release = self.now + cap.transmissionTime(bytes: Int64(size + link.overhead))
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
            self.transmit(flow, side, seq: seq, retransmission: false)
        }
    }

    private func wake(_ flow: Flow, _ side: FlowSide, at time: Instant) {
        if let pending = side.wakeAt, pending <= time { return }
        side.wakeAt = time
        self.schedule(.wake(flow.id, side.direction), at: time)
    }

    private func transmit(_ flow: Flow, _ side: FlowSide, seq: UInt64, retransmission: Bool) {
        self.counters.segmentsSent += 1
        let link = self.link(side.direction)
        if link.bandwidth == nil && !link.paused && link.queue.isEmpty {
            self.depart(flow.id, side.direction, seq: seq, at: self.now)
            return
        }
        let size = side.record(seq).size + link.overhead
        if !retransmission && !link.queue.isEmpty && link.queuedBytes + size > link.queueLimit {
            // Overflow. The connection holding the most of the queue loses a segment (fq_codel's
            // overflow rule), so one bulk transfer cannot starve the others; service stays FIFO, so
            // everyone still waits behind a full queue (bufferbloat).
            let mine = (link.queuedByFlow[flow.id] ?? 0) + size
            while link.queuedBytes + size > link.queueLimit,
                let victim = link.overflowVictim(otherThan: flow.id, holdingMoreThan: mine)
            {
                let slot = link.remove(at: victim)
                self.counters.queueDrops += 1
                if let victimFlow = self.flows[slot.flow] {
                    self.markLost(victimFlow, victimFlow.side(link.direction), seq: slot.seq)
                }
            }
            if link.queuedBytes + size > link.queueLimit {
                self.counters.queueDrops += 1
                self.markLost(flow, side, seq: seq)
                return
            }
        }
        link.queue.append(LinkSlot(flow: flow.id, seq: seq, wireBytes: size, retransmission: retransmission))
        link.queuedBytes += size
        link.queuedByFlow[flow.id, default: 0] += size
        self.serve(link)
    }

    // MARK: - Link

    /// Starts serializing the head of the queue unless the link is busy or stalled. A link without
    /// a rate limit only queues while stalled; it lets everything go at once when the stall ends.
    func serve(_ link: BottleneckLink) {
        guard !link.paused, !link.serving, let first = link.queue.first else { return }
        guard let bandwidth = link.bandwidth else {
            while let slot = link.queue.popFirst() {
                link.forget(slot)
                self.depart(slot.flow, link.direction, seq: slot.seq, at: self.now)
            }
            return
        }
        link.serving = true
        link.busyUntil = max(link.busyUntil, self.now) + bandwidth.transmissionTime(bytes: Int64(first.wireBytes))
        self.schedule(.linkFree(link.direction), at: link.busyUntil)
    }

    private func linkFree(_ link: BottleneckLink) {
        link.serving = false
        guard let slot = link.queue.popFirst() else { return }
        link.forget(slot)
        self.depart(slot.flow, link.direction, seq: slot.seq, at: self.now)
        self.serve(link)
    }

    /// Segments that reached the far end of a stalled direction arrive now (the stall ended).
    func releaseHeldArrivals(_ link: BottleneckLink) {
        let held = link.heldArrivals
        link.heldArrivals.removeAll()
        for arrival in held {
            guard let flow = self.flows[arrival.flow] else { continue }
            self.arrive(flow, flow.side(link.direction), seq: arrival.seq, generation: arrival.generation)
        }
    }

    private func depart(_ id: FlowID, _ direction: Direction, seq: UInt64, at time: Instant) {
        guard let flow = self.flows[id] else { return }
        let side = flow.side(direction)
        guard side.hasRecord(seq) else { return }
        if self.outageInForce == .blackhole {
            // Nothing passes through a blackhole; TCP repairs it by timeout once the link is back.
            // (`refuse` and `reset` turn new connections away; what is open keeps flowing, which
            // is also how a request reaches the proxy to be answered with the refusal.)
            self.counters.outageDrops += 1
            self.markLost(flow, side, seq: seq)
            return
        }
        if side.loss.nextIsLost() {
            self.counters.segmentsLost += 1
            self.markLost(flow, side, seq: seq)
            return
        }
        let arrival = side.delay.arrival(departingAt: time)
        self.schedule(.arrive(id, direction, seq: seq, generation: side.record(seq).generation), at: arrival)
    }

    // MARK: - Receiver

    private func arrive(_ flow: Flow, _ side: FlowSide, seq: UInt64, generation: Int) {
        guard side.hasRecord(seq) else { return }
        var record = side.record(seq)
        guard record.state == .inFlight, record.generation == generation else { return }
        record.state = .arrived
        record.arrivedAt = self.now
        side.setRecord(seq, record)

        // Data sent after a lost transmission arriving produces (selective) acknowledgements that
        // reveal the hole: three of them and the sender retransmits (SACK / RACK loss detection,
        // which also finds lost retransmissions).
        let reverseLatency = self.conditions.direction(side.direction.reversed).latency
        side.lastAckAt = self.now + reverseLatency
        for lostSeq in side.lostSeqs {
            var lost = side.record(lostSeq)
            guard lost.sentAt < record.sentAt, case .lost(let dupacks, let detectable) = lost.state, detectable
            else { continue }
            lost.state = .lost(dupacks: dupacks + 1, detectable: dupacks + 1 < 3)
            side.setRecord(lostSeq, lost)
            if dupacks + 1 == 3 {
                self.schedule(
                    .lossDetected(flow.id, side.direction, seq: lostSeq, generation: lost.generation),
                    at: self.now + reverseLatency
                )
            }
        }

        let ackAt = self.now + reverseLatency
        let sample: Span? = record.retransmitted ? nil : ackAt - record.sentAt
        self.schedule(.ack(flow.id, side.direction, seq: seq, bytes: record.size, rttSample: sample), at: ackAt)
        self.deliverInOrder(flow, side)
    }

    private func deliverInOrder(_ flow: Flow, _ side: FlowSide) {
        var bytes = 0
        while let first = side.records.first, first.state == .arrived {
            bytes += first.size
            if first.retransmitted || first.arrivedAt < self.now { self.counters.segmentsDelayed += 1 }
            side.records.removeFirst()
            side.baseSeq += 1
        }
        guard bytes > 0 else { return }
        side.backlog -= bytes
        switch side.direction {
        case .up: self.counters.bytesUp += Int64(bytes)
        case .down: self.counters.bytesDown += Int64(bytes)
        }
        if let last = self.pendingDeliveries.last, last.flow == flow.id, last.direction == side.direction,
            last.at == self.now
        {
            self.pendingDeliveries[self.pendingDeliveries.count - 1].bytes += bytes
        } else {
            self.pendingDeliveries.append(Delivery(flow: flow.id, direction: side.direction, bytes: bytes, at: self.now))
        }
    }

    // MARK: - Loss and repair

    private func markLost(_ flow: Flow, _ side: FlowSide, seq: UInt64) {
        var record = side.record(seq)
        record.state = .lost(dupacks: 0, detectable: true)
        side.setRecord(seq, record)
        let insertAt = side.lostSeqs.firstIndex(where: { $0 > seq }) ?? side.lostSeqs.endIndex
        side.lostSeqs.insert(seq, at: insertAt)
        let rto = min(side.retransmissionTimeout * Int64(1 << min(record.timeouts, 16)), Self.maxRTO)
        self.schedule(
            .timeout(flow.id, side.direction, seq: seq, generation: record.generation),
            at: record.sentAt + rto
        )
    }

    private func repair(_ flow: Flow, _ side: FlowSide, seq: UInt64, generation: Int, byTimeout: Bool) {
        guard side.hasRecord(seq) else { return }
        var record = side.record(seq)
        guard case .lost = record.state, record.generation == generation else { return }
        if byTimeout, let lastAck = side.lastAckAt {
            // The timer restarts whenever an acknowledgement arrives (RFC 6298 §5.3): it fires only
            // after a full RTO of silence.
            let rto = min(side.retransmissionTimeout * Int64(1 << min(record.timeouts, 16)), Self.maxRTO)
            if lastAck + rto > self.now {
                self.schedule(.timeout(flow.id, side.direction, seq: seq, generation: generation), at: lastAck + rto)
                return
            }
        }
        if let index = side.lostSeqs.firstIndex(of: seq) { side.lostSeqs.remove(at: index) }

        let inRecovery = side.recoveryEnd.map { seq <= $0 } ?? false
        if byTimeout {
            self.counters.timeouts += 1
            record.timeouts += 1
            side.window.onTimeout(reduceThreshold: !inRecovery)
            side.recoveryEnd = side.nextSeq - 1
        } else if !inRecovery {
            side.window.onFastRetransmit()
            side.recoveryEnd = side.nextSeq - 1
        }
        self.counters.retransmissions += 1
        record.retransmitted = true
        record.generation += 1
        record.state = .inFlight
        record.sentAt = self.now
        side.setRecord(seq, record)
        self.transmit(flow, side, seq: seq, retransmission: true)
        self.trySend(flow, side)
    }

    private func ack(_ flow: Flow, _ side: FlowSide, seq: UInt64, bytes: Int, rttSample: Span?) {
        side.inflight -= bytes
        if let rttSample { side.updateRTT(rttSample) }
        if let end = side.recoveryEnd, seq > end { side.recoveryEnd = nil }
        if side.recoveryEnd == nil {
            side.window.onAck(bytes: bytes, now: self.now, rtt: side.smoothedRTT ?? self.conditions.baseRTT)
        }
        self.trySend(flow, side)
    }

    // MARK: - State

    fileprivate func makeSide(_ direction: Direction, flowIndex: UInt64, now: Instant) -> FlowSide {
        let spec = self.conditions.direction(direction)
        let link = self.link(direction)
        let label: UInt64 = direction == .up ? 1 : 2
        let window = SenderWindow(
            algorithm: self.profile.tcp,
            mss: link.mss,
            receiveWindow: Self.receiveWindow,
            bandwidth: spec.pathRate,
            baseRTT: self.conditions.baseRTT
        )
        return FlowSide(
            direction: direction,
            window: window,
            loss: LossProcess(spec: spec.loss, seed: SeedDeriver.derive(self.seed, flowIndex, label, 1)),
            delay: DelayLine(
                latency: spec.latency,
                jitter: spec.jitter,
                seed: SeedDeriver.derive(self.seed, flowIndex, label, 2)
            ),
            capRate: self.capRate(for: spec, tcp: self.profile.tcp),
            tcp: self.profile.tcp,
            readyAt: now
        )
    }

    /// The rate a connection's own sender is held to: the per-connection cap, or for BBR (which
    /// paces at the bottleneck rate it measures instead of bursting its window into the queue) the
    /// path's rate.
    func capRate(for spec: LinkDirection, tcp: CongestionControl) -> Bandwidth? {
        tcp == .bbr ? spec.pathRate : spec.connectionBandwidth
    }
}

/// Identifies one connection within a `LinkModel`; numbered in the order connections opened.
public struct FlowID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public static func < (lhs: FlowID, rhs: FlowID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "#\(self.rawValue)" }
}

/// Bytes of one connection and direction that reached the other end, in order, at `at`.
public struct Delivery: Equatable, Sendable {
    public var flow: FlowID
    public var direction: Direction
    public var bytes: Int
    public var at: Instant

    public init(flow: FlowID, direction: Direction, bytes: Int, at: Instant) {
        self.flow = flow
        self.direction = direction
        self.bytes = bytes
        self.at = at
    }
}

/// What became of a connection attempt.
public enum ConnectOutcome: Equatable, Sendable {
    /// The handshake completed at this instant, after this many lost SYN or SYN-ACK attempts.
    case established(at: Instant, synRetransmits: Int)
    /// Refused (a `refuse` or `reset` outage): the client sees the refusal at this instant.
    case refused(at: Instant)
    /// Every attempt was lost; the client's kernel gives up at this instant.
    case timedOut(at: Instant)
    /// The profile's firewall does not allow the port (`otherwise: refuse`).
    case refusedByFirewall(at: Instant)
    /// The name is in the profile's `dns_fail` list.
    case nameNotResolved(at: Instant)

    /// The same outcome, at `instant`.
    func happening(at instant: Instant) -> ConnectOutcome {
        switch self {
        case .established(_, let retransmits): return .established(at: instant, synRetransmits: retransmits)
        case .refused: return .refused(at: instant)
        case .timedOut: return .timedOut(at: instant)
        case .refusedByFirewall: return .refusedByFirewall(at: instant)
        case .nameNotResolved: return .nameNotResolved(at: instant)
        }
    }
}

/// Something the driver must act on or report, in the order it happened.
public enum LinkNotice: Equatable, Sendable {
    /// The SYN of the attempt that gets through leaves now (its SYN-ACK will not be lost either):
    /// the server's side learns of the connection from here on, and never before. Before a refused,
    /// blackholed or timed-out attempt, or one a rule stops, there is none.
    case handshakeUnderWay(FlowID, at: Instant)
    /// A `connect` finished.
    case connected(FlowID, ConnectOutcome)
    /// The connection was cut (a `reset` outage began: `.reset`; or a cut); the model has forgotten it.
    case cut(FlowID, CutMode, at: Instant)
    /// The link's state changed: a schedule phase began or ended, an outage or a stall began or ended.
    case stateChanged(LinkState, at: Instant)
}

/// What the link is doing, for the status line and the event log.
public struct LinkState: Equatable, Sendable, CustomStringConvertible {
    /// The schedule phase in force (`lte`, `tunnel`), or the profile's name outside a schedule.
    public var phase: String
    public var outage: OutageBehaviour?
    /// Directions in which no byte moves now.
    public var stalled: [Direction]

    public init(phase: String, outage: OutageBehaviour? = nil, stalled: [Direction] = []) {
        self.phase = phase
        self.outage = outage
        self.stalled = stalled
    }

    public var description: String {
        var parts = [self.phase]
        if let outage = self.outage { parts.append("outage (\(outage))") }
        if !self.stalled.isEmpty {
            parts.append("stalled " + (self.stalled.count == 2 ? "both ways" : self.stalled[0].description))
        }
        return parts.joined(separator: ", ")
    }
}

/// Totals for the run summary.
public struct LinkCounters: Equatable, Sendable {
    public var connections = 0
    public var bytesUp: Int64 = 0
    public var bytesDown: Int64 = 0
    /// Transmissions put on the link, retransmissions included.
    public var segmentsSent = 0
    /// Transmissions lost on the wire (the profile's loss process).
    public var segmentsLost = 0
    /// Transmissions dropped because the bottleneck queue was full.
    public var queueDrops = 0
    public var retransmissions = 0
    public var timeouts = 0
    /// Segments delivered later than they arrived (held behind a hole) or only after a repair.
    public var segmentsDelayed = 0
    /// Transmissions lost because an outage was in force.
    public var outageDrops = 0
    /// Connections reset by a `reset` outage or a `reset` cut.
    public var resets = 0
    /// Connections closed early by a `close` cut.
    public var closes = 0
    /// Connection attempts that met a firewall rule or a `dns_fail` name.
    public var setupFailures = 0
    /// Connection attempts refused by a `refuse` or `reset` outage.
    public var refusedConnections = 0

    public init() {}
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
    case linkFree(Direction)
    case arrive(FlowID, Direction, seq: UInt64, generation: Int)
    case ack(FlowID, Direction, seq: UInt64, bytes: Int, rttSample: Span?)
    case lossDetected(FlowID, Direction, seq: UInt64, generation: Int)
    case timeout(FlowID, Direction, seq: UInt64, generation: Int)
    case wake(FlowID, Direction)
    case synAttempt(FlowID, attempt: Int)
    case connectResult(FlowID, ConnectOutcome)
    case timelineTick
}

/// The shared bottleneck of one direction: a FIFO served at the link rate.
final class BottleneckLink {
    let direction: Direction
    let mss: Int
    private(set) var bandwidth: Bandwidth?
    private(set) var queueLimit: Int
    /// Payload bytes per unit: the MSS where segmentation matters, a large chunk otherwise.
    private(set) var unitSize: Int
    /// Header bytes counted on the link per unit.
    private(set) var overhead: Int
    var queue = Deque<LinkSlot>()
    var queuedBytes = 0
    /// Queued bytes per connection (entries removed when they reach zero).
    var queuedByFlow: [FlowID: Int] = [:]
    var busyUntil = Instant.zero
    /// A `linkFree` event is pending for the head of the queue.
    var serving = false
    /// Stalled: nothing is serialized and nothing arrives at the far end.
    var paused = false
    /// Segments that reached the far end while the direction was stalled, in arrival order.
    var heldArrivals: [HeldArrival] = []

    init(direction: Direction, spec: LinkDirection, mss: Int) {
        self.direction = direction
        self.mss = mss
        self.bandwidth = nil
        self.queueLimit = 0
        self.unitSize = 0
        self.overhead = 0
        self.configure(spec)
    }

    /// Takes new conditions. Queued segments stay queued (in order); new segments use the new size.
    func configure(_ spec: LinkDirection) {
        self.bandwidth = spec.bandwidth
        self.queueLimit = Int(spec.queue.bytes)
        let segmented = spec.bandwidth != nil || spec.connectionBandwidth != nil || spec.loss != .none
        self.unitSize = segmented ? self.mss : LinkModel.unlimitedUnit
        self.overhead = segmented ? Int(Profile.headerOverhead.bytes) : 0
    }
}

struct HeldArrival {
    var flow: FlowID
    var seq: UInt64
    var generation: Int
}

extension BottleneckLink {
    func forget(_ slot: LinkSlot) {
        self.queuedBytes -= slot.wireBytes
        let left = (self.queuedByFlow[slot.flow] ?? 0) - slot.wireBytes
        self.queuedByFlow[slot.flow] = left > 0 ? left : nil
    }

    /// Queue index of the segment to drop on overflow: the last droppable segment (never the one
    /// being serialized, never a retransmission) of the connection, other than `flow`, that holds
    /// the most queued bytes, if that is more than `threshold`. Ties go to the lowest connection
    /// number, so runs are reproducible.
    func overflowVictim(otherThan flow: FlowID, holdingMoreThan threshold: Int) -> Int? {
        var best: (flow: FlowID, bytes: Int)?
        for (candidate, bytes) in self.queuedByFlow where candidate != flow && bytes > threshold {
            if let current = best, current.bytes > bytes || (current.bytes == bytes && current.flow < candidate) {
                continue
            }
            best = (candidate, bytes)
        }
        guard let victim = best?.flow else { return nil }
        guard let index = self.queue.lastIndex(where: { $0.flow == victim && !$0.retransmission }), index > 0 else {
            return nil
        }
        return index
    }

    func remove(at index: Int) -> LinkSlot {
        let slot = self.queue.remove(at: index)
        self.forget(slot)
        return slot
    }
}

struct LinkSlot {
    var flow: FlowID
    var seq: UInt64
    var wireBytes: Int
    var retransmission: Bool
}

final class Flow {
    let id: FlowID
    let up: FlowSide
    let down: FlowSide
    var setupRandom: SeededRandom
    /// The firewall drops this connection's SYNs (`otherwise: blackhole`).
    var firewalled = false

    init(id: FlowID, model: LinkModel, now: Instant) {
        self.id = id
        self.up = model.makeSide(.up, flowIndex: id.rawValue, now: now)
        self.down = model.makeSide(.down, flowIndex: id.rawValue, now: now)
        self.setupRandom = SeededRandom(seed: SeedDeriver.derive(model.seed, id.rawValue, 3))
    }

    func side(_ direction: Direction) -> FlowSide {
        direction == .up ? self.up : self.down
    }
}

/// One direction of one connection: the sender's window and buffers, the receiver's reassembly.
final class FlowSide {
    let direction: Direction
    var window: SenderWindow
    var loss: LossProcess
    var delay: DelayLine
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

    init(
        direction: Direction,
        window: SenderWindow,
        loss: LossProcess,
        delay: DelayLine,
        capRate: Bandwidth?,
        tcp: CongestionControl,
        readyAt: Instant
    ) {
        self.direction = direction
        self.window = window
        self.loss = loss
        self.delay = delay
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
