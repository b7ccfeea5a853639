/// Connection set-up in the stream engine: the DNS delay, the profile's set-up rules, a SYN /
/// SYN-ACK round trip whose packets can be lost and are retried as Linux retries them, and an
/// outage's refusals. Nothing is sent on a connection before its set-up is over.
extension LinkModel {
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

    func synAttempt(_ flow: Flow, attempt: Int) {
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
    func retrySYN(_ flow: Flow, after attempt: Int) {
        let timeout = Span.seconds(1) * Int64(1 << attempt)
        if attempt < Self.synRetries {
            self.schedule(.synAttempt(flow.id, attempt: attempt + 1), at: self.now + timeout)
        } else {
            self.schedule(.connectResult(flow.id, .timedOut(at: .zero)), at: self.now + timeout)
        }
    }

    /// Outcomes are scheduled undated and stamped with the moment they happen.
    func connectResult(_ flow: Flow, _ outcome: ConnectOutcome) {
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
