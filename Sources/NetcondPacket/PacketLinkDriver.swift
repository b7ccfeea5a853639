import HeapModule
import NetcondCore

/// Everything the packet engine decides about a packet, without the kernel: the closed portal's
/// gate, the set-up rules (firewall, `connect_hold`, `dns_fail`, DNS and connect delays) of the
/// profile and of the packet's route, an outage's refusals, the flow table, each connection's
/// route, and the ``LinkNetwork`` both engines drive (the access link, and each route's link behind
/// it). Pure and in virtual time: the engine (``PacketEngine``) reads packets and carries out what
/// this says; a test drives it with packets it makes up, without root.
///
/// ```
///  packet read at t ─▶ its connection's route (decided on its first packet: address, port, name from DNS)
///                  ─▶ blackhole? ─▶ portal's gate ─▶ firewall ─▶ dns_fail ─▶ refuse/reset outage (SYN)
///                      (access:     (reset / lost)   (refuse /   (NXDOMAIN   (reset one round trip later:
///                       dropped)                      lost)       answered)   the access link's, + the route's)
///                  ─▶ flow table, connect_hold, set-up delays ─▶ LinkNetwork.offer(route:)
///                  ─▶ held until delivered, or dropped (now by the first path, or later by the route's)
/// ```
/// The access link's rules and the route's both hold: a firewall or an outage of either stops a
/// connection, the route's set-up delays add to the access link's, and `connect_hold` counts the
/// attempts of each (the longer hold wins).
struct PacketLinkDriver {
    /// The access link (the profile's, every connection's) and the routes' links behind it.
    var network: LinkNetwork<HeldPacket, FlowKey>
    /// The access link's timeline (each route's is the network's).
    private(set) var timeline: ConditionTimeline
    /// What crossed the link, for the summary (the engine adds what only it knows).
    var summary = PacketSummary()
    var flows = TCPFlowTable()
    /// A closed captive portal's gate on what leaves the cage (nil: no portal, or open).
    var captiveGate: PacketCaptiveGate?
    /// The lookups `dns_fail` failed, in order (for a scenario's evidence).
    var lookups: [PacketLookupFailure] = []
    /// Connection attempts from the cage so far: on the access link, and per route (`connect_hold`).
    var connectAttempts = 0
    var routeAttempts: [Int: Int] = [:]
    var holdUntil: [FlowKey: Instant] = [:]
    var resets = Heap<ScheduledReset>()
    /// Packets netcond sends in a server's place (a DNS failure's answer), due at their moments.
    var injected = Heap<InjectedPacket>()
    var sequence: UInt64 = 0
    /// Each connection's route (TCP by its flow, UDP by its addresses and ports), and the names
    /// learnt for far addresses.
    var tcpRoutes = ConnectionRoutes()
    var udpRoutes = ConnectionRoutes()
    var names = RouteNames()
    /// Some route matches host names (DNS answers are read only then).
    var routesByName: Bool
    /// Some route has `dns_fail` names (its timeline's profile, which a live switch changes).
    var routesFailNames: Bool
    /// The TCP connections a handover left on the network the device left:
    /// nothing of them is carried again. UDP is not: a datagram sent after it leaves from the new
    /// network, as a real device's socket would send it.
    /// Each with the sequence number just past the cage's SYN when the handover came (nil: not
    /// seen), so that the connection's own SYN sent again is told from a new one from that port.
    var stranded: [FlowKey: UInt32?] = [:]
    /// A handover under way: when its gap ends, and the profile the device is then on.
    var handoverEnds: (at: Instant, profile: Profile)?
    /// An IPv6-only run's NAT64: a connection to an address of its prefix matches routes by the
    /// IPv4 address inside (nil: not IPv6-only).
    var nat64: IPv6OnlySpec?
    private var lastState: LinkState
    /// Told of every change of the link's state, with its moment.
    private let onStateChange: ((LinkState, Instant) -> Void)?

    init(profile: Profile, seed: UInt64, onStateChange: ((LinkState, Instant) -> Void)? = nil) {
        self.timeline = ConditionTimeline(profile: profile, seed: seed)
        self.network = LinkNetwork(access: self.timeline, routes: profile.routes, seed: seed)
        self.lastState = self.timeline.state
        self.onStateChange = onStateChange
        self.routesByName = profile.routes.contains { !$0.match.hosts.isEmpty }
        self.routesFailNames = profile.routes.contains { !$0.profile.setup.dnsFail.isEmpty }
        for route in profile.routes { self.summary.addLane(name: route.name, match: route.match.description) }
    }

    /// The access link's conditions.
    var conditions: LinkConditions { self.network.access.conditions }
    var setup: SetupRules { self.timeline.profile.setup }

    // MARK: - Admission

    /// A packet read from the queue at `now`: true when the link took it (it is held until
    /// ``popEvent(upTo:)`` gives it back, delivered or dropped), false when it is to be dropped
    /// now. `bytes`: its bytes when the engine keeps them (a capture); `payload`: what the queue
    /// handed over.
    mutating func admit(
        _ packet: HeldPacket, up: Bool, wireLength: Int, segments: Int, payload: UnsafePointer<UInt8>?, copied: Int,
        bytes: [UInt8]?, at now: Instant
    ) -> Bool {
        let index = up ? 0 : 1
        let tcp = packet.tcp
        if !up, self.routesByName, let payload, tcp.map({ $0.sourcePort == 53 }) ?? true {
            for (name, addresses) in dnsAnswerAddresses(UnsafeBufferPointer(start: payload, count: copied)) {
                self.learn(name: name, addresses: addresses)
            }
        }
        let route = self.route(tcp, up: up, payload: payload, copied: copied)
        if let tcp, !self.stranded.isEmpty, let synEnd = self.stranded[FlowKey(tcp, up: up)] {
            if up && tcp.isSYN && synEnd != tcp.seq &+ 1 {
                // A new connection from the same port (the stranded one long gone): a network's own.
                self.stranded[FlowKey(tcp, up: up)] = nil
            } else {
                // On the network the device left: gone, and neither end is told.
                self.summary.directions[index].packets += segments
                self.countDrop(.outage, up ? .up : .down, route: route, segments: segments)
                return false
            }
        }
        self.summary.directions[index].packets += segments
        if let route { self.summary.laneCounts[route][index].packets += segments }
        if self.network.access[up ? .up : .down].blackholed {
            // Followed all the same: an attempt the blackhole swallows is evidence too.
            if let tcp, self.flows.offered(tcp, up: up, at: now) { self.countConnection(route) }
            _ = self.network.offer(packet, up ? .up : .down, route: nil, bytes: wireLength, connection: nil, at: now)
            self.countDrop(.outage, up ? .up : .down, route: route, segments: segments)
            return false
        }
        if up, self.stoppedLeaving(tcp, route: route, payload: payload, copied: copied, segments: segments, at: now) {
            return false
        }
        if up, tcp == nil, self.failsNames, copied == Int(packet.length), let payload,
            self.answerFailingLookup(Array(UnsafeBufferPointer(start: payload, count: copied)), route: route, at: now)
        {
            return false
        }
        if let tcp {
            if up && tcp.isSYN, let refusing = self.refusingOutage(route) {
                // The far end turns the connection away: a reset one round trip (in force) after the SYN.
                self.summary.refusedConnections += 1
                if let route { self.summary.laneCounts[route].refusedConnections += 1 }
                self.flows.refusedByLink(tcp, at: now)
                self.refuse(tcp, route: refusing, at: now)
                return false
            }
            if self.flows.offered(tcp, up: up, at: now) {
                self.countConnection(route)
                if up { self.countAttempt(tcp, route: route, at: now) }
            }
        }
        var held = packet
        held.bytes = bytes
        held.wireLength = UInt32(clamping: wireLength)
        held.segments = UInt32(clamping: segments)
        held.route = route.map { Int32($0) } ?? -1
        // A copy or a changed byte needs the whole packet (the queue hands it over whole then).
        if held.bytes == nil, copied == Int(packet.length), let payload, self.damages(up ? .up : .down, route: route) {
            held.bytes = Array(UnsafeBufferPointer(start: payload, count: copied))
        }
        return self.offer(held, up: up, tcp: tcp, payload: payload, copied: copied, route: route, at: now)
    }

    /// Offers a packet the rules let through to the network, with its set-up delay.
    private mutating func offer(
        _ held: HeldPacket, up: Bool, tcp: TCPHeader?, payload: UnsafePointer<UInt8>?, copied: Int, route: Int?,
        at now: Instant
    ) -> Bool {
        let extra = up ? self.setupDelay(tcp, payload: payload, copied: copied, route: route, at: now) : .zero
        let direction: Direction = up ? .up : .down
        switch self.network.offer(
            held, direction, route: route, bytes: Int(held.wireLength), connection: tcp.map { FlowKey($0, up: up) },
            extraDelay: extra, at: now)
        {
        case .dropped(let why):
            self.countDrop(why, direction, route: route, segments: Int(held.segments))
            return false
        case .delivers, .held:
            self.summary.directions[up ? 0 : 1].bytes += Int64(held.wireLength)
            if let route { self.summary.laneCounts[route][up ? 0 : 1].bytes += Int64(held.wireLength) }
            return true
        }
    }

    /// Whether either path of a packet in `direction` on `route` may duplicate or corrupt it.
    private func damages(_ direction: Direction, route: Int?) -> Bool {
        let access = self.network.access[direction].conditions
        if access.duplicate > .zero || access.corrupt > .zero { return true }
        guard let route else { return false }
        let own = self.network.route(route)[direction].conditions
        return own.duplicate > .zero || own.corrupt > .zero
    }

    private mutating func countConnection(_ route: Int?) {
        self.summary.connections += 1
        if let route { self.summary.laneCounts[route].connections += 1 }
    }

    /// A drop, by cause, in the summary and in the route's lane.
    mutating func countDrop(_ why: PathDrop, _ direction: Direction, route: Int?, segments: Int) {
        let index = direction == .up ? 0 : 1
        Self.add(why, segments, to: &self.summary.directions[index])
        if let route { Self.add(why, segments, to: &self.summary.laneCounts[route][index]) }
    }

    private static func add(_ why: PathDrop, _ segments: Int, to counts: inout PacketSummary.Direction) {
        switch why {
        case .lost: counts.lost += segments
        case .queueFull, .connectionQueueFull: counts.queueDrops += segments
        case .aqm: counts.aqmDrops += segments
        case .outage: counts.outageDrops += segments
        }
    }

    // MARK: - Delivery

    /// The next packet the network delivered by `now`, or dropped on its route's path (counted
    /// here; the engine drops it), in time order.
    mutating func popEvent(upTo now: Instant) -> NetworkEvent<HeldPacket>? {
        let event = self.network.popEvent(upTo: now)
        if case .dropped(let direction, let packet, let why)? = event {
            let route = packet.route < 0 ? nil : Int(packet.route)
            self.countDrop(why, direction, route: route, segments: Int(packet.segments))
            // Counted as delivered bytes when its first path took it.
            let index = direction == .up ? 0 : 1
            self.summary.directions[index].bytes -= Int64(packet.wireLength)
            if let route { self.summary.laneCounts[route][index].bytes -= Int64(packet.wireLength) }
        }
        return event
    }

    /// The engine let a delivered packet go (`corrupted`: with a byte changed, which its receiver's
    /// checksum discards, so the flow table does not count it).
    mutating func delivered(_ delivery: PathDelivery<HeldPacket>, _ direction: Direction, corrupted: Bool) {
        let index = direction == .up ? 0 : 1
        let route = delivery.unit.route < 0 ? nil : Int(delivery.unit.route)
        if delivery.isCopy {
            self.summary.directions[index].duplicated += 1
            if let route { self.summary.laneCounts[route][index].duplicated += 1 }
            return
        }
        // Counted here, not when decided: a packet still held when the run ends never reaches its
        // receiver corrupted, and the summary says what receivers' checksums discarded.
        if corrupted {
            self.summary.directions[index].corrupted += 1
            if let route { self.summary.laneCounts[route][index].corrupted += 1 }
        }
        if let tcp = delivery.unit.tcp, !corrupted { self.flows.delivered(tcp, up: direction == .up) }
    }

    /// When something is next due: a delivery, a change of conditions (the access link's or a
    /// route's), a reset, an injected answer.
    var nextMoment: Instant? {
        // No array: the engine asks once per turn of its loop.
        Instant.earliest(
            Instant.earliest(self.network.nextDelivery, self.nextChange),
            Instant.earliest(self.resets.min?.at, self.injected.min?.at))
    }

    /// ``nextMoment`` and ``nextChange`` read in place: the engine's loop asks through these,
    /// since a non-mutating read of a struct held in a class's property copies the whole value
    /// first (every table in it retained and released, once per turn of the loop).
    mutating func nextMomentInPlace() -> Instant? { self.nextMoment }
    mutating func nextChangeInPlace() -> Instant? { self.nextChange }

    /// Takes what is due by `moment` off a copy of the network, thrown away: the code and memory
    /// of the pop the engine's precise mode makes at that moment are in the CPU's caches by then.
    /// After 100 ms asleep on a VM, that pop alone took 15-25 µs (0.6 µs warm), added to the delay
    /// (Docs/benchmarks.md, 9c). The network is values throughout (its generators too), so the
    /// copy changes nothing of it. Mutating only so that the engine's driver is not copied whole.
    mutating func warmUp(upTo moment: Instant) {
        var copy = self.network
        while copy.popEvent(upTo: moment) != nil {}
    }

    // MARK: - Conditions

    /// When the access link's timeline or a route's next changes by itself.
    var nextChange: Instant? {
        Instant.earliest(
            Instant.earliest(self.timeline.nextChange, self.network.nextRouteChange), self.handoverEnds?.at)
    }

    /// Applies the timelines' changes due by `now`, one moment at a time; what the network
    /// delivered or dropped before each change goes to `deliver` first (it met the old conditions).
    mutating func follow(to now: Instant, deliver: (NetworkEvent<HeldPacket>) -> Void) {
        while let next = self.nextChange, next <= now {
            while let event = self.popEvent(upTo: next) { deliver(event) }
            if let change = self.timeline.nextChange, change <= next {
                self.timeline.advance(to: next)
                self.apply(at: next)
            }
            if let change = self.network.nextRouteChange, change <= next {
                for route in self.network.followRoutes(at: next) { self.cutConnections(route: route, at: next) }
            }
            if let ends = self.handoverEnds, ends.at <= next { self.endHandover(at: next) }
        }
    }

    /// A change from `netcond ctl` at `now` (after ``follow(to:deliver:)`` up to `now`).
    mutating func control(_ command: PacketCommand, at now: Instant) {
        switch command {
        case .switchProfile(let profile):
            self.timeline.switchProfile(to: profile, at: now)
            self.replaceRoutes(with: profile.routes, at: now)
            self.network.switchRadio(to: profile.radio, at: now)
        case .outage(let outage): self.timeline.setOutage(outage, at: now)
        case .stall(let stall): self.timeline.setStall(stall, at: now)
        case .cut:
            self.cutConnections(at: now)
            return
        case .routeOutage, .routeStall, .switchRoute:
            self.controlRoute(command, at: now)
            return
        case .handover(let profile, let gap):
            self.handover(to: profile, gap: gap, at: now)
            return
        }
        self.apply(at: now)
    }

    /// Brings the access paths in line with the timeline; a reset outage cuts what is open; reports
    /// a new state.
    private mutating func apply(at moment: Instant) {
        let outage = self.network.access.outage
        self.network.access.follow(self.timeline, at: moment)
        if self.network.access.outage != outage, self.network.access.outage == .reset {
            self.cutConnections(at: moment)
        }
        let state = self.timeline.state
        if state != self.lastState {
            self.lastState = state
            self.onStateChange?(state, moment)
        }
    }

    // MARK: - Handover

    /// A handover, as in the stream engine (``LinkModel/handover(to:gap:at:)``): the TCP
    /// connections open at the moment are stranded — their packets, either way, go nowhere and no
    /// reset is sent, so both ends' kernels retransmit into the void until they give up — the link
    /// carries nothing during the gap (a blackhole), then the device is on the new profile's link.
    /// Starts one at `now`; returns how many connections it stranded. One under way is
    /// replaced (its gap restarts, towards the new profile).
    @discardableResult
    mutating func handover(to profile: Profile, gap: Span, at now: Instant) -> Int {
        var stranded = 0
        for key in self.flows.keys where self.stranded[key] == nil {
            self.stranded[key] = .some(self.flows.synEnd(of: key))
            stranded += 1
        }
        self.summary.connectionsStranded += stranded
        self.timeline.setOutage(.blackhole, at: now)
        self.apply(at: now)
        self.handoverEnds = (now + gap, profile)
        if gap == .zero { self.endHandover(at: now) }
        return stranded
    }

    /// The handover's gap is over: the new profile (its routes too), and the outage ends.
    mutating func endHandover(at now: Instant) {
        guard let ends = self.handoverEnds, ends.at <= now else { return }
        self.handoverEnds = nil
        self.timeline.switchProfile(to: ends.profile, at: now)
        self.network.switchRadio(to: ends.profile.radio, at: now)
        self.replaceRoutes(with: ends.profile.routes, at: now)
        self.timeline.setOutage(nil, at: now)
        self.apply(at: now)
    }
}
