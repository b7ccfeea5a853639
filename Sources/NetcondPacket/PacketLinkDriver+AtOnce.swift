import NetcondCore

extension PacketLinkDriver {
    /// Whether any packet offered in `direction` now is certain to be delivered at its moment,
    /// whole and unchanged, and before anything else: ``admit`` would take it, and
    /// ``popEvent(upTo:)`` would give it back next, delivered at the moment it was offered, whatever
    /// the packet is (a SYN, a DNS query, a reset). The engine then lets such a packet go before
    /// ``admit`` has run, which still runs right after, in the same order, for the counters, the
    /// flow table and the radio: the client meets the same link, and its packet no longer waits
    /// for netcond's bookkeeping (see Docs/engines.md, "Letting a packet go at once").
    ///
    /// So it holds only when nothing here can drop, hold, delay, change, copy, answer or re-route a
    /// packet, and nothing can be ahead of it:
    /// - no routes (each has a path, rules and name look-ups of its own), no NAT64;
    /// - nothing on the network, in either direction (a packet never overtakes one before it);
    /// - the access link's conditions hold nothing back (``PacketEngine/decidesNothingPerPacket(_:)``,
    ///   no latency, no DNS or connect delay), and no outage, stall or handover is in force;
    /// - no set-up rules (firewall, `connect_hold`, `dns_fail`), no closed portal, nothing stranded
    ///   and no connection held.
    /// Any change to ``admit``, to the network or to what changes the configuration part that can
    /// drop, delay or change a packet under such conditions must make this false for them: the
    /// engine counts a packet it let go that the link then did not deliver at once
    /// (``PacketSummary/letGoTooSoon``), and a test checks these conditions against ``admit``
    /// (PacketAtOnceTests).
    func passesAtOnce(_ direction: Direction) -> Bool {
        self.configurationPassesAtOnce(direction) && self.nothingIsAheadAtOnce
    }

    /// The part of ``passesAtOnce(_:)`` that only the profile, the timelines and live control
    /// change (``follow(to:deliver:)``, ``control(_:at:)``, the portal's gate): the engine keeps
    /// it from one change to the next, as reading it copies the conditions and the profile.
    func configurationPassesAtOnce(_ direction: Direction) -> Bool {
        guard self.network.pathRoutes.isEmpty, self.nat64 == nil, self.handoverEnds == nil, self.captiveGate == nil,
            self.network.access.outage == nil, self.network.access[direction].stalledSince == nil,
            !self.network.access[direction].blackholed, self.timeline.profile.setup.isEmpty, !self.routesFailNames
        else { return false }
        let conditions = self.network.access.conditions
        let own = conditions.direction(direction)
        return conditions.dnsDelay == .zero && conditions.connectDelay == .zero && own.latency == .zero
            && PacketEngine.decidesNothingPerPacket(own)
    }

    /// The part of ``passesAtOnce(_:)`` that packets change: nothing on the network, nothing
    /// stranded, no connection held.
    var nothingIsAheadAtOnce: Bool {
        self.network.nextDelivery == nil && self.network.access[.up].unitsOnPath == 0
            && self.network.access[.down].unitsOnPath == 0 && self.stranded.isEmpty && self.holdUntil.isEmpty
    }

    /// ``nothingIsAheadAtOnce``, read in place: the engine's driver is a property of a class, and a
    /// non-mutating read of it would copy the whole driver first (every table in it retained and
    /// released), once per read of the queue.
    mutating func nothingIsAheadAtOnceInPlace() -> Bool { self.nothingIsAheadAtOnce }
}
