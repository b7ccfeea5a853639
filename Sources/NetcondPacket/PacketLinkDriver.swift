import HeapModule
import NetcondCore

/// Everything the packet engine decides about a packet, without the kernel: the closed portal's
/// gate, the profile's set-up rules (firewall, `connect_hold`, `dns_fail`, DNS and connect
/// delays), an outage's refusals, the flow table, and the ``LinkPaths`` both engines drive. Pure
/// and in virtual time: the engine (``PacketEngine``) reads packets and carries out what this
/// says; a test drives it with packets it makes up, without root.
///
/// ```
///  packet read at t ─▶ blackhole? ─▶ portal's gate ─▶ firewall ─▶ dns_fail ─▶ refuse/reset outage (SYN)
///                       (dropped)    (reset / lost)   (refuse /   (NXDOMAIN   (reset one round trip later)
///                                                      lost)       answered)
///                  ─▶ flow table, connect_hold, set-up delays ─▶ LinkPaths.offer ─▶ held until delivered, or dropped
/// ```
struct PacketLinkDriver {
    private(set) var links: LinkPaths<HeldPacket, FlowKey>
    private(set) var timeline: ConditionTimeline
    /// What crossed the link, for the summary (the engine adds what only it knows).
    var summary = PacketSummary()
    private(set) var flows = TCPFlowTable()
    /// A closed captive portal's gate on what leaves the cage (nil: no portal, or open).
    var captiveGate: PacketCaptiveGate?
    /// The lookups `dns_fail` failed, in order (for a scenario's evidence).
    private(set) var lookups: [PacketLookupFailure] = []
    private var connectAttempts = 0
    private var holdUntil: [FlowKey: Instant] = [:]
    private var resets = Heap<ScheduledReset>()
    /// Packets netcond sends in a server's place (a DNS failure's answer), due at their moments.
    private var injected = Heap<InjectedPacket>()
    private var sequence: UInt64 = 0
    private var lastState: LinkState
    /// Told of every change of the link's state, with its moment.
    private let onStateChange: ((LinkState, Instant) -> Void)?

    init(profile: Profile, seed: UInt64, onStateChange: ((LinkState, Instant) -> Void)? = nil) {
        self.timeline = ConditionTimeline(profile: profile, seed: seed)
        self.links = LinkPaths(self.timeline, seed: seed)
        self.lastState = self.timeline.state
        self.onStateChange = onStateChange
    }

    var conditions: LinkConditions { self.links.conditions }
    private var setup: SetupRules { self.timeline.profile.setup }

    // MARK: - Admission

    /// A packet read from the queue at `now`: true when the link took it (it is held until
    /// ``popDelivery(upTo:)`` gives it back), false when it is to be dropped now. `bytes`: its
    /// bytes when the engine keeps them (a capture); `payload`: what the queue handed over.
    mutating func admit(
        _ packet: HeldPacket, up: Bool, wireLength: Int, segments: Int, payload: UnsafePointer<UInt8>?, copied: Int,
        bytes: [UInt8]?, at now: Instant
    ) -> Bool {
        let direction: Direction = up ? .up : .down
        let index = up ? 0 : 1
        let tcp = packet.tcp
        self.summary.directions[index].packets += segments
        if self.links[direction].blackholed {
            // Followed all the same: an attempt the blackhole swallows is evidence too.
            if let tcp, self.flows.offered(tcp, up: up, at: now) { self.summary.connections += 1 }
            _ = self.links[direction].offer(packet, bytes: wireLength, connection: nil, at: now)
            self.summary.directions[index].outageDrops += segments
            return false
        }
        if up, let gate = self.captiveGate, let payload, let stop = gate.decide(payload, copied: copied, tcp: tcp) {
            self.summary.portalStopped += segments
            if self.stopAttempt(tcp, reset: stop == .reset, at: now) {
                gate.onStop(stop, PacketCaptiveGate.target(payload, copied: copied, tcp: tcp))
            }
            return false
        }
        if up, let action = self.firewall(tcp, payload: payload, copied: copied) {
            self.summary.firewallStopped += segments
            self.stopAttempt(tcp, reset: action == .refuse, at: now)
            return false
        }
        if up, tcp == nil, !self.setup.dnsFail.isEmpty, copied == Int(packet.length), let payload,
            self.answerFailingLookup(Array(UnsafeBufferPointer(start: payload, count: copied)), at: now)
        {
            return false
        }
        if let tcp {
            if up && tcp.isSYN && (self.links.outage == .refuse || self.links.outage == .reset) {
                // The far end turns the connection away: a reset one round trip (in force) after the SYN.
                self.summary.refusedConnections += 1
                self.flows.refusedByLink(tcp, at: now)
                self.refuse(tcp, at: now)
                return false
            }
            if self.flows.offered(tcp, up: up, at: now) {
                self.summary.connections += 1
                if up { self.countAttempt(tcp, at: now) }
            }
        }
        let extra = up ? self.setupDelay(tcp, payload: payload, copied: copied, at: now) : .zero
        var held = packet
        held.bytes = bytes
        // A copy or a changed byte needs the whole packet (the queue hands it over whole then).
        let c = self.links[direction].conditions
        if held.bytes == nil, c.duplicate > .zero || c.corrupt > .zero, copied == Int(packet.length), let payload {
            held.bytes = Array(UnsafeBufferPointer(start: payload, count: copied))
        }
        switch self.links[direction].offer(
            held, bytes: wireLength, connection: tcp.map { FlowKey($0, up: up) }, extraDelay: extra, at: now)
        {
        case .dropped(let why):
            switch why {
            case .lost: self.summary.directions[index].lost += segments
            case .queueFull, .connectionQueueFull: self.summary.directions[index].queueDrops += segments
            case .aqm: self.summary.directions[index].aqmDrops += segments
            case .outage: self.summary.directions[index].outageDrops += segments
            }
            return false
        case .delivers, .held:
            self.summary.directions[index].bytes += Int64(wireLength)
            return true
        }
    }

    /// The reset that answers a SYN sent at `now`, one round trip later: the one in force then (a
    /// step series' delays of the moment, not its first row's).
    private mutating func refuse(_ tcp: TCPHeader, at now: Instant) {
        let at = now + self.conditions.roundTrip(from: now)
        self.scheduleReset(FlowKey(tcp, up: true), towardCage: true, at: at, answering: tcp.seq &+ 1)
    }

    /// A closed portal or the firewall stops a packet leaving the cage: a new connection's SYN is
    /// reset one round trip later (as a refusal) or lost; anything else is lost. Returns whether
    /// this was a new attempt (a swallowed SYN's retransmissions are the same one).
    @discardableResult
    private mutating func stopAttempt(_ tcp: TCPHeader?, reset: Bool, at now: Instant) -> Bool {
        guard let tcp else { return false }
        if reset {
            self.flows.refusedByLink(tcp, at: now)
            self.refuse(tcp, at: now)
            return true
        }
        guard self.flows.offered(tcp, up: true, at: now) else { return false }
        self.summary.connections += 1
        return true
    }

    // MARK: - Set-up rules

    /// What the profile's firewall does to a packet leaving the cage (nil: it passes). It decides
    /// new TCP connections by their port (`refuse` or `blackhole`) and loses UDP to other ports;
    /// DNS (53) passes, as the proxy's own lookups do.
    private func firewall(_ tcp: TCPHeader?, payload: UnsafePointer<UInt8>?, copied: Int) -> FirewallAction? {
        guard let allowed = self.setup.allowPorts else { return nil }
        if let tcp {
            guard tcp.isSYN, tcp.destinationPort != 53, !allowed.contains(Int(tcp.destinationPort)) else { return nil }
            return self.setup.otherwise
        }
        guard let payload, let head = PacketHead(payload, copied: copied),
            head.isUDP, let port = head.destinationPort, port != 53, !allowed.contains(Int(port))
        else { return nil }
        return .blackhole
    }

    /// A new connection from the cage: the first `connect_hold` ones wait before their handshake
    /// starts (every SYN of theirs arrives when the hold ends).
    private mutating func countAttempt(_ tcp: TCPHeader, at now: Instant) {
        let index = self.connectAttempts
        self.connectAttempts += 1
        if self.setup.hold > .zero && index < self.setup.holdFirst {
            self.holdUntil[FlowKey(tcp, up: true)] = now + self.setup.hold
            self.summary.connectsHeld += 1
        }
    }

    /// A DNS query for a name `dns_fail` names: answered NXDOMAIN in the server's place, a round
    /// trip (the one in force) and the profile's DNS delay later. Returns whether it was (then the
    /// query goes no further).
    private mutating func answerFailingLookup(_ bytes: [UInt8], at now: Instant) -> Bool {
        guard let question = DNSFailure.question(bytes), self.setup.nameFails(question.name) else { return false }
        self.summary.lookupsFailed += 1
        self.sequence += 1
        self.injected.insert(
            InjectedPacket(
                at: now + self.conditions.roundTrip(from: now) + self.conditions.dnsDelay, sequence: self.sequence,
                bytes: DNSFailure.reply(to: bytes, question: question)))
        self.lookups.append(PacketLookupFailure(name: question.name, at: now))
        return true
    }

    /// The profile's extra set-up delays: `connect_delay` on a connection's first SYN, `dns_delay`
    /// on a query to port 53 (UDP or TCP).
    private mutating func setupDelay(_ tcp: TCPHeader?, payload: UnsafePointer<UInt8>?, copied: Int, at now: Instant)
        -> Span
    {
        if let tcp {
            if tcp.destinationPort == 53 && self.conditions.dnsDelay > .zero { return self.conditions.dnsDelay }
            guard tcp.isSYN else { return .zero }
            var delay = self.conditions.connectDelay
            if !self.holdUntil.isEmpty, let until = self.holdUntil[FlowKey(tcp, up: true)] {
                if until > now { delay = max(delay, until - now) } else { self.holdUntil[FlowKey(tcp, up: true)] = nil }
            }
            return delay
        }
        guard self.conditions.dnsDelay > .zero, let payload, let head = PacketHead(payload, copied: copied), head.isUDP
        else { return .zero }
        return head.destinationPort == 53 ? self.conditions.dnsDelay : .zero
    }

    // MARK: - Delivery

    /// The next packet the link delivered by `now`, with its direction.
    mutating func popDelivery(upTo now: Instant) -> (Direction, PathDelivery<HeldPacket>)? {
        self.links.popDelivery(upTo: now)
    }

    /// The engine let a delivered packet go (`corrupted`: with a byte changed, which its receiver's
    /// checksum discards, so the flow table does not count it).
    mutating func delivered(_ delivery: PathDelivery<HeldPacket>, _ direction: Direction, corrupted: Bool) {
        let index = direction == .up ? 0 : 1
        if delivery.isCopy {
            self.summary.directions[index].duplicated += 1
            return
        }
        // Counted here, not when decided: a packet still held when the run ends never reaches its
        // receiver corrupted, and the summary says what receivers' checksums discarded.
        if corrupted { self.summary.directions[index].corrupted += 1 }
        if let tcp = delivery.unit.tcp, !corrupted { self.flows.delivered(tcp, up: direction == .up) }
    }

    /// When something is next due: a delivery, a change of conditions, a reset, an injected answer.
    var nextMoment: Instant? {
        // No array: the engine asks once per turn of its loop.
        Instant.earliest(
            Instant.earliest(self.links.nextDelivery, self.timeline.nextChange),
            Instant.earliest(self.resets.min?.at, self.injected.min?.at))
    }

    // MARK: - Conditions

    /// Applies the timeline's changes due by `now`, one moment at a time; what the link delivered
    /// before each change goes to `deliver` first (it arrived under the old conditions).
    mutating func follow(to now: Instant, deliver: (Direction, PathDelivery<HeldPacket>) -> Void) {
        while let next = self.timeline.nextChange, next <= now {
            while let (direction, delivery) = self.links.popDelivery(upTo: next) { deliver(direction, delivery) }
            self.timeline.advance(to: next)
            self.apply(at: next)
        }
    }

    /// A change from `netcond ctl` at `now` (after ``follow(to:deliver:)`` up to `now`).
    mutating func control(_ command: PacketCommand, at now: Instant) {
        switch command {
        case .switchProfile(let profile): self.timeline.switchProfile(to: profile, at: now)
        case .outage(let outage): self.timeline.setOutage(outage, at: now)
        case .stall(let stall): self.timeline.setStall(stall, at: now)
        case .cut:
            self.cutConnections(at: now)
            return
        }
        self.apply(at: now)
    }

    /// Brings the paths in line with the timeline; a reset outage cuts what is open; reports a new state.
    private mutating func apply(at moment: Instant) {
        let outage = self.links.outage
        self.links.follow(self.timeline, at: moment)
        if self.links.outage != outage, self.links.outage == .reset { self.cutConnections(at: moment) }
        let state = self.timeline.state
        if state != self.lastState {
            self.lastState = state
            self.onStateChange?(state, moment)
        }
    }

    // MARK: - Resets and answers

    /// Cuts every TCP connection on the link with a reset to each end, as a middlebox that drops the
    /// connections would: each reset reaches its end after that direction's delay in force, with the
    /// sequence number the end expects then. Returns how many connections.
    @discardableResult
    mutating func cutConnections(at now: Instant) -> Int {
        let keys = self.flows.keys
        for key in keys {
            self.flows.markCut(key)
            self.scheduleReset(key, towardCage: true, at: now + self.conditions.down.delay(at: now))
            self.scheduleReset(key, towardCage: false, at: now + self.conditions.up.delay(at: now))
        }
        self.summary.connectionsCut += keys.count
        return keys.count
    }

    /// `answering`: the reset answers a SYN (RST|ACK acknowledging it, sequence 0).
    private mutating func scheduleReset(
        _ key: FlowKey, towardCage: Bool, at moment: Instant, answering syn: UInt32? = nil
    ) {
        self.sequence += 1
        self.resets.insert(
            ScheduledReset(at: moment, sequence: self.sequence, key: key, towardCage: towardCage, answering: syn))
    }

    /// The next reset due by `now`, addressed, with the sequence number its end expects (a cut
    /// connection's end that has gone quiet since is skipped).
    mutating func dueReset(upTo now: Instant) -> ResetToSend? {
        while let next = self.resets.min, next.at <= now {
            _ = self.resets.removeMin()
            let key = next.key
            var seq: UInt32 = 0
            var ack: UInt32 = 0
            if let syn = next.answering {
                ack = syn
            } else {
                let expected = self.flows.resetSequence(key, towardCage: next.towardCage)
                self.flows.resetSent(key, towardCage: next.towardCage)
                guard let expected else { continue }
                seq = expected
            }
            let length = key.version == 6 ? 16 : 4
            let cage = key.cage.bytes(count: length)
            let far = key.far.bytes(count: length)
            return next.towardCage
                ? ResetToSend(
                    version: key.version, source: far, sourcePort: key.farPort, destination: cage,
                    destinationPort: key.cagePort, seq: seq, ack: ack, answersSYN: next.answering != nil)
                : ResetToSend(
                    version: key.version, source: cage, sourcePort: key.cagePort, destination: far,
                    destinationPort: key.farPort, seq: seq, ack: ack, answersSYN: next.answering != nil)
        }
        return nil
    }

    /// The next packet due by `now` that netcond sends in a server's place.
    mutating func dueInjected(upTo now: Instant) -> [UInt8]? {
        guard let next = self.injected.min, next.at <= now else { return nil }
        return self.injected.removeMin().bytes
    }
}

/// A reset for the engine to send.
struct ResetToSend: Equatable {
    var version: UInt8
    var source: [UInt8]
    var sourcePort: UInt16
    var destination: [UInt8]
    var destinationPort: UInt16
    var seq: UInt32
    var ack: UInt32
    /// It answers a SYN (RST|ACK).
    var answersSYN: Bool
}

/// A packet netcond sends in a server's place at a moment.
struct InjectedPacket: Comparable {
    var at: Instant
    var sequence: UInt64
    var bytes: [UInt8]

    static func < (a: InjectedPacket, b: InjectedPacket) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
    static func == (a: InjectedPacket, b: InjectedPacket) -> Bool { a.sequence == b.sequence }
}

/// A reset netcond sends to one end of a connection at a moment.
struct ScheduledReset: Comparable {
    var at: Instant
    var sequence: UInt64
    var key: FlowKey
    var towardCage: Bool
    /// The acknowledgement of a refused SYN (the reset answers it), or nil for a cut.
    var answering: UInt32?

    static func < (a: ScheduledReset, b: ScheduledReset) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
    static func == (a: ScheduledReset, b: ScheduledReset) -> Bool { a.sequence == b.sequence }
}
