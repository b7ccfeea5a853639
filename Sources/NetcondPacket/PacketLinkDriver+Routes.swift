import NetcondCore

/// Each connection's route: decided once, on the first packet seen of it (a SYN; a 5-tuple's first
/// datagram), from where it goes — the far address and port, the transport, and the name learnt
/// for that address (``RouteNames``) — then kept, so that a packet costs one look-up however many
/// routes there are. The live changes of one route (its outage, a stall, new conditions).
extension PacketLinkDriver {
    /// The route of the connection a packet belongs to (nil: none matched, no routes, or neither
    /// TCP nor UDP: a ping meets the access link alone).
    mutating func route(_ tcp: TCPHeader?, up: Bool, payload: UnsafePointer<UInt8>?, copied: Int) -> Int? {
        // A connection on a path whose route a profile switch took away keeps that path.
        guard !self.network.pathRoutes.isEmpty else { return nil }
        if let tcp {
            let key = FlowKey(tcp, up: up)
            if let known = self.tcpRoutes.lookUp(key) { return known < 0 ? nil : Int(known) }
            let route = self.decideRoute(key, transport: .tcp)
            self.tcpRoutes.remember(key, route)
            return route
        }
        guard let payload, let head = PacketHead(payload, copied: copied), head.isUDP,
            let sourcePort = head.sourcePort, let destinationPort = head.destinationPort
        else { return nil }
        let key = FlowKey(
            version: head.version, cage: up ? head.source : head.destination,
            cagePort: up ? sourcePort : destinationPort,
            far: up ? head.destination : head.source, farPort: up ? destinationPort : sourcePort)
        if let known = self.udpRoutes.lookUp(key) { return known < 0 ? nil : Int(known) }
        let route = self.decideRoute(key, transport: .udp)
        self.udpRoutes.remember(key, route)
        return route
    }

    /// The first route whose match holds for the connection `key` (the name last learnt for its far
    /// address, if any).
    private func decideRoute(_ key: FlowKey, transport: RouteMatch.Transport) -> Int? {
        var address = key.far.bytes(count: key.version == 6 ? 16 : 4)
        // Behind a NAT64, the server's own address.
        if let server = self.nat64?.embedded(address) { address = server }
        let target = RouteTarget(
            host: self.names.isEmpty ? nil : self.names.name(for: address), address: address, port: Int(key.farPort),
            transport: transport)
        return self.network.route(for: target)
    }

    /// `name` resolves to `addresses` (a DNS answer going down to the cage, or a name the session
    /// wrote to the command's hosts file): a later connection to one of them matches routes by
    /// that name. The last answer for an address wins.
    mutating func learn(name: String, addresses: [[UInt8]]) {
        self.names.learn(name: name, addresses: addresses.map { self.nat64?.embedded($0) ?? $0 })
    }

    /// A profile switch's routes: a route of the same name keeps its path, a new one gets a lane of
    /// its own, a path whose route is gone keeps its connections (``LinkNetwork/replaceRoutes(with:at:)``).
    mutating func replaceRoutes(with routes: [Route], at now: Instant) {
        for route in self.network.replaceRoutes(with: routes, at: now) { self.cutConnections(route: route, at: now) }
        for route in self.network.pathRoutes.dropFirst(self.summary.laneCounts.count) {
            self.summary.addLane(name: route.name, match: route.match.description)
        }
        self.routesFailNames = self.network.routeTimelines.contains { !$0.profile.setup.dnsFail.isEmpty }
        self.routesByName = self.routesByName || routes.contains { !$0.match.hosts.isEmpty }
    }

    /// A live change of one route (``PacketCommand/routeOutage(route:_:)``, ``PacketCommand/routeStall(route:_:)``,
    /// ``PacketCommand/switchRoute(route:_:)``) at `now`; a reset outage starting cuts the route's
    /// connections. `route` is a path index (``LinkNetwork/route(named:)``); one out of range changes nothing.
    mutating func controlRoute(_ command: PacketCommand, at now: Instant) {
        switch command {
        case .routeOutage(let route, let outage) where self.network.routeTimelines.indices.contains(route):
            if self.network.setOutage(outage, route: route, at: now) { self.cutConnections(route: route, at: now) }
        case .routeStall(let route, let stall) where self.network.routeTimelines.indices.contains(route):
            self.network.setStall(stall, route: route, at: now)
        case .switchRoute(let route, let profile) where self.network.routeTimelines.indices.contains(route):
            if self.network.switchRoute(route, to: profile, at: now) { self.cutConnections(route: route, at: now) }
            self.routesFailNames = self.network.routeTimelines.contains { !$0.profile.setup.dnsFail.isEmpty }
        default:
            break
        }
    }

    /// Whether any path needs each packet's whole bytes now: a duplicate or a corruption on the
    /// access link or a route, `dns_fail` of the profile or a route (a query is answered whole), a
    /// route matching names (the DNS answers are read whole).
    var needsWholePackets: Bool {
        PacketEngine.needsWholePackets(self.conditions, self.setup) || self.routesFailNames || self.routesByName
            || self.network.routeTimelines.indices.contains {
                PacketEngine.needsWholePackets(self.network.route($0).conditions, SetupRules())
            }
    }

    /// Whether no path in `direction` (the access link's, any route's) decides anything per packet:
    /// then a GSO packet may cross whole.
    func decidesNothingPerPacket(_ direction: Direction) -> Bool {
        PacketEngine.decidesNothingPerPacket(self.conditions.direction(direction))
            && self.network.routeTimelines.indices.allSatisfy {
                PacketEngine.decidesNothingPerPacket(self.network.route($0)[direction].conditions)
            }
    }
}

/// The route of each connection (TCP: its flow; UDP: its addresses and ports), as an index into
/// the routes (-1: none matched). Bounded: two generations of at most ``limit`` connections each;
/// when the newer fills, the older is forgotten, and a connection found there moves to the newer —
/// so a connection still sending keeps its route, and only one idle through ``limit`` new ones is
/// decided again (the same way, unless a name learnt since changes its match).
struct ConnectionRoutes {
    private var current: [FlowKey: Int32] = [:]
    private var previous: [FlowKey: Int32] = [:]
    static let limit = 65_536

    /// The connection's route, if decided (-1: none).
    mutating func lookUp(_ key: FlowKey) -> Int32? {
        if let route = self.current[key] { return route }
        guard let route = self.previous.removeValue(forKey: key) else { return nil }
        self.remember(key, route == -1 ? nil : Int(route))
        return route
    }

    mutating func remember(_ key: FlowKey, _ route: Int?) {
        if self.current.count >= Self.limit {
            self.previous = self.current
            self.current = [:]
        }
        self.current[key] = route.map { Int32($0) } ?? -1
    }

    /// The route of a connection whose route was decided (nil: none, or not decided).
    func route(of key: FlowKey) -> Int? {
        guard let route = self.current[key] ?? self.previous[key], route >= 0 else { return nil }
        return Int(route)
    }
}

extension FlowKey {
    /// A connection of another transport (UDP) by its addresses and ports.
    init(version: UInt8, cage: PacketAddress, cagePort: UInt16, far: PacketAddress, farPort: UInt16) {
        self.version = version
        self.cage = cage
        self.cagePort = cagePort
        self.far = far
        self.farPort = farPort
    }
}
