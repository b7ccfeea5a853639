/// Connection set-up in the stream engine: the DNS delay, the profile's set-up rules, a SYN and a
/// SYN-ACK that cross the link's paths as data does, retried as Linux retries them, and an outage's
/// refusals. Nothing is sent on a connection before its set-up is over.
///
/// ```
///  connect ─▶ dns_delay, rules, ─▶ SYN (60 B) ─▶ up path ─▶ SYN-ACK (60 B) ─▶ down path ─▶ established
///            hold, connect_delay   ▲           (loss, queue, rate, delay in force)
///                                  └── lost: the client's timer sends it again after 1, 2, 4 … s
/// ```
/// A SYN and a SYN-ACK meet what a data packet of their size meets then: the loss process (in a
/// Gilbert–Elliott burst too, and a step series' loss in force), the bottleneck queue (they wait
/// behind what is queued, and a full queue drops them), the rate and the delay in force, a stall
/// and a blackhole; the packet engine's handshakes are real packets on the same paths.
extension LinkModel {
    /// Bytes on the wire of a SYN or a SYN-ACK (IPv4 and TCP headers with their options).
    static let handshakeBytes = 60

    /// A connection the link did not set up (a proxy's splice relay, while the link was
    /// transparent) was made: it counts among the attempts `connect_hold`'s first N are taken from.
    public func noteConnectAttempt() {
        self.connectAttempts += 1
    }

    /// Emulates the connection set-up: DNS delay for names, the connect delay, then a SYN / SYN-ACK
    /// exchange across the link's paths, lost and retried after 1 s, 2 s, 4 … (6 retries, 127 s in
    /// all, as Linux does). Nothing is sent on the flow until it is established. The outcome
    /// arrives as a `LinkNotice` (`established`, `refused` during a `refuse`/`reset` outage, or
    /// `timedOut`) from `takeNotices()` at the instant it happens.
    ///
    /// The profile's set-up rules come first: a name in `dns_fail` fails after the DNS delay
    /// (`nameNotResolved`), a port the firewall does not allow is refused one round trip later
    /// (`refusedByFirewall`) or blackholed, and the first connections may be held before their
    /// handshake starts (`connect_hold`). A refusal comes one round trip (the one in force when
    /// the SYN leaves) after the SYN.
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
        let route = intercept == nil ? self.links.route(for: RouteTarget(named: host, port: port)) : nil
        let verdict =
            intercept ?? self.setupVerdict(host: host, port: port, isName: resolvesName, index: index, route: route)
        guard let flow = self.flows[id] else { return verdict }
        if let route {
            flow.route = route
            self.routeConnections[route, default: 0] += 1
            self.retarget(flow)
        }
        flow.up.readyAt = .distantFuture
        flow.down.readyAt = .distantFuture
        flow.settingUp = true
        let beyond = route.map { self.links.route($0).conditions }
        // The look-up meets the DNS delay of the route whose hosts name it (its port not known yet).
        let lookedUp = resolvesName && intercept == nil ? self.links.route(lookingUp: host) : nil
        let dnsDelay = self.conditions.dnsDelay + (lookedUp.map { self.links.route($0).conditions.dnsDelay } ?? .zero)
        let resolved = resolvesName ? self.now + dnsDelay : self.now
        var synLeaves = resolved + self.conditions.connectDelay + (beyond?.connectDelay ?? .zero)
        if let route, flow.up.nextSeq > 0 {
            // The client's bytes that named the destination (a proxy request's head, a CONNECT, a
            // SOCKS5 request) crossed the access link before the route was known: the route's
            // share of their way is taken here, before the handshake.
            synLeaves = synLeaves + self.links.route(route).conditions.up.delay(at: self.now)
        }
        switch verdict {
        case .nameFails:
            self.counters.setupFailures += 1
            self.schedule(.connectResult(id, .nameNotResolved(at: .zero)), at: resolved)
        case .refused:
            self.counters.setupFailures += 1
            let refusedAt = synLeaves + self.links.roundTrip(route: route, from: synLeaves)
            self.schedule(.connectResult(id, .refusedByFirewall(at: .zero)), at: refusedAt)
        case .blackholed:
            self.counters.setupFailures += 1
            flow.firewalled = true
            self.schedule(.synAttempt(id, attempt: 0), at: synLeaves)
        case .proceed(let hold):
            self.schedule(.synAttempt(id, attempt: 0), at: synLeaves + hold)
        }
        return verdict
    }

    /// The client sends its SYN number `attempt` (0: the first) now.
    func synAttempt(_ flow: Flow, attempt: Int) {
        // A SYN-ACK came before this retransmission was due.
        guard flow.settingUp else { return }
        flow.synAttempt = attempt
        if flow.firewalled { return self.armSYNTimer(flow, after: attempt) }
        // The access link's outage decides first (the SYN meets it first), then the route's.
        switch self.outageInForce ?? self.links.outage(route: flow.route) {
        case .refuse, .reset:
            // The far end turns it away: a reset one round trip (the one in force now) later.
            let refusedAt = self.now + self.links.roundTrip(route: flow.route, from: self.now)
            self.schedule(.connectResult(flow.id, .refused(at: .zero)), at: refusedAt)
        case .blackhole, nil:
            // A blackhole is the path's gate: the SYN is offered, and dropped there.
            self.armSYNTimer(flow, after: attempt)
            self.sendHandshake(flow, .up, attempt: attempt)
        }
    }

    /// The client's SYN timer, from the SYN that leaves now: the next SYN after 1, 2, 4 … s, and
    /// after the last one, the time-out.
    func armSYNTimer(_ flow: Flow, after attempt: Int) {
        let timeout = Span.seconds(1) * Int64(1 << attempt)
        if attempt < Self.synRetries {
            self.schedule(.synAttempt(flow.id, attempt: attempt + 1), at: self.now + timeout)
        } else {
            self.schedule(.connectResult(flow.id, .timedOut(at: .zero)), at: self.now + timeout)
        }
    }

    /// Puts a SYN (up) or the far end's SYN-ACK (down) answering SYN number `attempt` on the
    /// path, as a packet of ``handshakeBytes``. A drop needs nothing more: the client's timer
    /// sends the SYN again.
    func sendHandshake(_ flow: Flow, _ direction: Direction, attempt: Int) {
        if flow.stranded { return }  // on the network the device left
        let unit = SegmentRef(flow: flow.id, seq: 0, generation: attempt, isHandshake: true)
        let admission = self.links.offer(
            unit, direction, route: flow.route, bytes: Self.handshakeBytes, connection: flow.id, at: self.now)
        // The path decided at once that this SYN reaches the server: it learns of the connection
        // from now (the real one has the round trip to be made in). A SYN a stall holds tells it
        // when it arrives.
        if direction == .up, case .delivers(_, .none, _) = admission { self.serverLearns(flow) }
    }

    /// A SYN or a SYN-ACK reached the far end of its path: the server answers every SYN that
    /// reaches it; the first SYN-ACK to reach the client establishes the connection. A copy is
    /// ignored, a corrupted one discarded (its checksum fails).
    func handshakeArrived(_ delivery: PathDelivery<SegmentRef>, _ direction: Direction) {
        guard !delivery.isCopy, delivery.corruptByte == nil, let flow = self.flows[delivery.unit.flow], flow.settingUp,
            !flow.stranded
        else { return }
        switch direction {
        case .up:
            self.serverLearns(flow)
            self.sendHandshake(flow, .down, attempt: delivery.unit.generation)
        case .down:
            self.connectResult(flow, .established(at: .zero, synRetransmits: flow.synAttempt))
        }
    }

    /// The server's side learns of the connection (once): the driver may make the real one now.
    private func serverLearns(_ flow: Flow) {
        guard !flow.serverReached else { return }
        flow.serverReached = true
        self.pendingNotices.append(.handshakeUnderWay(flow.id, at: self.now))
    }

    /// Outcomes are scheduled undated and stamped with the moment they happen; the first one ends
    /// the set-up (a time-out due after the SYN-ACK came is none).
    func connectResult(_ flow: Flow, _ outcome: ConnectOutcome) {
        guard flow.settingUp else { return }
        flow.settingUp = false
        if case .refused = outcome { self.counters.refusedConnections += 1 }
        self.pendingNotices.append(.connected(flow.id, outcome.happening(at: self.now)))
        self.releaseAfterSetUp(flow)
    }

    /// The set-up is over: data moves again. After a failed one too, since the client's side of
    /// the flow lives on and the proxy answers it (502, SOCKS5 reply) over the same emulated link.
    func releaseAfterSetUp(_ flow: Flow) {
        flow.up.readyAt = self.now
        flow.down.readyAt = self.now
        self.trySend(flow, flow.up)
        self.trySend(flow, flow.down)
    }
}
