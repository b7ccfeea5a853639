import NetcondCore

/// The set-up rules, the access link's and the route's: the portal's gate and the firewalls on
/// what leaves the cage, refusals, `connect_hold`, `dns_fail`, and the DNS and connect delays.
extension PacketLinkDriver {
    /// A route's set-up rules as its timeline holds them (a live switch of the route changes them).
    func routeSetup(_ route: Int) -> SetupRules { self.network.routeTimelines[route].profile.setup }

    /// A closed portal or a firewall (the access link's, then the route's) stops a packet leaving
    /// the cage. Returns whether it did (then it is dropped).
    mutating func stoppedLeaving(
        _ tcp: TCPHeader?, route: Int?, payload: UnsafePointer<UInt8>?, copied: Int, segments: Int, at now: Instant
    ) -> Bool {
        if let gate = self.captiveGate, let payload, let stop = gate.decide(payload, copied: copied, tcp: tcp) {
            self.summary.portalStopped += segments
            if self.stopAttempt(tcp, reset: stop == .reset, route: route, refusedBy: nil, at: now) {
                gate.onStop(stop, PacketCaptiveGate.target(payload, copied: copied, tcp: tcp))
            }
            return true
        }
        var action = Self.firewall(self.setup, tcp, payload: payload, copied: copied)
        var refusedBy: Int? = nil
        if action == nil, let route {
            action = Self.firewall(self.routeSetup(route), tcp, payload: payload, copied: copied)
            refusedBy = route
        }
        guard let action else { return false }
        self.summary.firewallStopped += segments
        if let route { self.summary.laneCounts[route].firewallStopped += segments }
        self.stopAttempt(tcp, reset: action == .refuse, route: route, refusedBy: refusedBy, at: now)
        return true
    }

    /// The route whose outage turns a new connection on `route` away (`refuse` or `reset`): nil
    /// for the access link's own (its round trip alone), the route for the route's; nil when
    /// neither does. (A double optional: none, or the access link, or a route.)
    func refusingOutage(_ route: Int?) -> Int?? {
        let access = self.network.access.outage
        if access == .refuse || access == .reset { return .some(nil) }
        let own = self.network.outage(route: route)
        if own == .refuse || own == .reset { return .some(route) }
        return nil
    }

    /// The reset that answers a SYN sent at `now`, one round trip later: the one in force then (a
    /// step series' delays of the moment, not its first row's) up to where it was refused — the
    /// access link (`route` nil), or the route's far end.
    mutating func refuse(_ tcp: TCPHeader, route: Int?, at now: Instant) {
        let at = now + self.network.roundTrip(route: route, from: now)
        self.scheduleReset(FlowKey(tcp, up: true), towardCage: true, at: at, answering: tcp.seq &+ 1)
    }

    /// A closed portal or a firewall stops a packet leaving the cage: a new connection's SYN is
    /// reset one round trip later (as a refusal; `refusedBy`: the route whose firewall refused it,
    /// nil for the access link's) or lost; anything else is lost. Returns whether this was a new
    /// attempt (a swallowed SYN's retransmissions are the same one).
    @discardableResult
    mutating func stopAttempt(_ tcp: TCPHeader?, reset: Bool, route: Int?, refusedBy: Int?, at now: Instant) -> Bool {
        guard let tcp else { return false }
        if reset {
            self.flows.refusedByLink(tcp, at: now)
            self.refuse(tcp, route: refusedBy, at: now)
            return true
        }
        guard self.flows.offered(tcp, up: true, at: now) else { return false }
        self.summary.connections += 1
        if let route { self.summary.laneCounts[route].connections += 1 }
        return true
    }

    /// What a firewall's `setup` does to a packet leaving the cage (nil: it passes). It decides new
    /// TCP connections by their port (`refuse` or `blackhole`) and loses UDP to other ports; DNS
    /// (53) passes, as the proxy's own lookups do.
    static func firewall(_ setup: SetupRules, _ tcp: TCPHeader?, payload: UnsafePointer<UInt8>?, copied: Int)
        -> FirewallAction?
    {
        guard let allowed = setup.allowPorts else { return nil }
        if let tcp {
            guard tcp.isSYN, tcp.destinationPort != 53, !allowed.contains(Int(tcp.destinationPort)) else { return nil }
            return setup.otherwise
        }
        guard let payload, let head = PacketHead(payload, copied: copied),
            head.isUDP, let port = head.destinationPort, port != 53, !allowed.contains(Int(port))
        else { return nil }
        return .blackhole
    }

    /// A new connection from the cage: the first `connect_hold` ones of the access link, and of its
    /// route, wait before their handshake starts (every SYN of theirs arrives when the longer hold ends).
    mutating func countAttempt(_ tcp: TCPHeader, route: Int?, at now: Instant) {
        var hold = self.connectAttempts < self.setup.holdFirst ? self.setup.hold : .zero
        self.connectAttempts += 1
        if let route {
            let rules = self.routeSetup(route)
            if self.routeAttempts[route, default: 0] < rules.holdFirst { hold = max(hold, rules.hold) }
            self.routeAttempts[route, default: 0] += 1
        }
        guard hold > .zero else { return }
        self.holdUntil[FlowKey(tcp, up: true)] = now + hold
        self.summary.connectsHeld += 1
        if let route { self.summary.laneCounts[route].connectsHeld += 1 }
    }

    /// A DNS query for a name `dns_fail` names (the profile's or any route's): answered NXDOMAIN in
    /// the server's place, a round trip (the one in force to the resolver, on the query's `route`)
    /// and the DNS delays later. Returns whether it was (then the query goes no further).
    mutating func answerFailingLookup(_ bytes: [UInt8], route: Int?, at now: Instant) -> Bool {
        guard let question = DNSFailure.question(bytes), self.nameFails(question.name) else { return false }
        self.summary.lookupsFailed += 1
        self.sequence += 1
        let at = now + self.network.roundTrip(route: route, from: now) + self.dnsDelay(lookingUp: question.name)
        self.injected.insert(
            InjectedPacket(at: at, sequence: self.sequence, bytes: DNSFailure.reply(to: bytes, question: question)))
        self.lookups.append(PacketLookupFailure(name: question.name, at: now))
        return true
    }

    /// Whether `dns_fail` of the profile or of a route names any name (queries are read then).
    var failsNames: Bool { !self.setup.dnsFail.isEmpty || self.routesFailNames }

    /// Whether `dns_fail` of the profile or of a route names `name`.
    private func nameFails(_ name: String) -> Bool {
        if self.setup.nameFails(name) { return true }
        guard self.routesFailNames else { return false }
        return self.network.routeTimelines.contains { $0.profile.setup.nameFails(name) }
    }

    /// The DNS delay a look-up of `name` meets (nil: a packet of a query whose name is not in it):
    /// the access link's, and that of the route whose hosts name it, as in the stream engine.
    private func dnsDelay(lookingUp name: String?) -> Span {
        guard let name, self.routesByName, let route = self.network.route(lookingUp: name) else {
            return self.conditions.dnsDelay
        }
        return self.conditions.dnsDelay + self.network.route(route).conditions.dnsDelay
    }

    /// The name a DNS query to port 53 (UDP, or one TCP segment holding it whole) asks for.
    private func lookedUpName(_ payload: UnsafePointer<UInt8>?, copied: Int) -> String? {
        guard self.routesByName, let payload, let head = PacketHead(payload, copied: copied),
            let message = head.dnsMessage(payload, copied: copied, serverPort: head.destinationPort)
        else { return nil }
        let bytes = Array(UnsafeBufferPointer(start: payload, count: message.upperBound))
        return DNSFailure.question(bytes[...], at: message.lowerBound)?.name
    }

    /// The extra set-up delays (the access link's and the route's): `connect_delay` on a
    /// connection's first SYN (or its hold), `dns_delay` on a query to port 53 (UDP or TCP; the
    /// route's share on the packet that holds the query's name).
    mutating func setupDelay(
        _ tcp: TCPHeader?, payload: UnsafePointer<UInt8>?, copied: Int, route: Int?, at now: Instant
    ) -> Span {
        if let tcp {
            if tcp.destinationPort == 53,
                case let delay = self.dnsDelay(lookingUp: self.lookedUpName(payload, copied: copied)), delay > .zero
            {
                return delay
            }
            guard tcp.isSYN else { return .zero }
            var delay = self.conditions.connectDelay
            if let route { delay = delay + self.network.route(route).conditions.connectDelay }
            if !self.holdUntil.isEmpty, let until = self.holdUntil[FlowKey(tcp, up: true)] {
                if until > now { delay = max(delay, until - now) } else { self.holdUntil[FlowKey(tcp, up: true)] = nil }
            }
            return delay
        }
        guard let payload, let head = PacketHead(payload, copied: copied), head.isUDP, head.destinationPort == 53 else {
            return .zero
        }
        return self.dnsDelay(lookingUp: self.lookedUpName(payload, copied: copied))
    }
}
