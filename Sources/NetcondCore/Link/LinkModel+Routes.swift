/// The routes beyond the access link in the stream engine: each connection takes the first route
/// whose match holds for the name (or address) and port it asked for, when it connects; its
/// segments cross the access link and the route's link in series (``LinkNetwork``), its set-up
/// meets the access link's rules and then the route's, and its sender aims at the slower of the
/// two links and their summed round trip.
extension LinkModel {
    /// The routes in force, in the order the profile gives them.
    public var routes: [Route] { self.links.routes }

    /// The path index of each route in force, in the profile's order.
    public var routePaths: [Int] { self.links.routesInForce }

    /// Route `path` as it stands now (for status).
    public func routeView(_ path: Int) -> RouteView {
        self.links.view(ofRoute: path, at: self.now)
    }

    /// The path index of the route in force called `name` (nil: none): what the route's live
    /// changes take.
    public func routeIndex(named name: String) -> Int? {
        self.links.route(named: name)
    }

    /// The path index of the route a connection takes (nil: none, or unknown connection).
    public func route(of id: FlowID) -> Int? {
        self.flows[id]?.route
    }

    /// The set-up verdict of the access link's rules, then, when they let the connection go on,
    /// the route's (its `firewall`, its `connect_hold` counted over its own attempts, its
    /// `dns_fail`); holds add up.
    func setupVerdict(host: String, port: Int, isName: Bool, index: Int, route: Int?) -> SetupVerdict {
        let access = self.profile.setup.verdict(host: host, port: port, isName: isName, index: index)
        guard let route, case .proceed(let hold) = access else { return access }
        let attempt = self.routeAttempts[route, default: 0]
        self.routeAttempts[route] = attempt + 1
        let beyond = self.links.routeTimelines[route].profile.setup.verdict(
            host: host, port: port, isName: isName, index: attempt)
        guard case .proceed(let more) = beyond else { return beyond }
        return .proceed(hold: hold + more)
    }

    /// How long an unimpeded set-up of connection `id` to `host:port` takes from `now`: the DNS and
    /// connect delays and the handshake's round trip, of the access link and of the route it would
    /// take (and that route's share of the way of bytes the client sent before it was known, as
    /// ``connect(_:at:host:port:resolvesName:intercept:)`` charges it).
    public func unimpededSetUp(_ id: FlowID?, host: String, port: Int, resolvesName: Bool) -> Span {
        let route = self.links.route(for: RouteTarget(named: host, port: port))
        let beyond = route.map { self.links.route($0).conditions }
        var before = self.conditions.connectDelay + (beyond?.connectDelay ?? .zero)
        if resolvesName { before = before + self.conditions.dnsDelay + (beyond?.dnsDelay ?? .zero) }
        if let beyond, let id, let flow = self.flows[id], flow.up.nextSeq > 0 {
            before = before + beyond.up.delay(at: self.now)
        }
        return before + self.links.roundTrip(route: route, from: self.now + before)
    }

    // MARK: - Live control

    /// Starts (or, with nil, ends) an outage on one route from `now`; a `reset` cuts its connections.
    public func setOutage(_ outage: OutageBehaviour?, route: Int, at now: Instant) {
        self.catchUp(to: now)
        if self.links.setOutage(outage, route: route, at: self.now) { self.cutAllConnections(.reset, route: route) }
    }

    /// Stalls one route (or, with nil, ends its live stall) from `now`.
    public func setStall(_ stall: StallDirection?, route: Int, at now: Instant) {
        self.catchUp(to: now)
        self.links.setStall(stall, route: route, at: self.now)
    }

    /// New conditions for one route from `now`: `profile`'s link, schedule and stalls.
    public func switchRoute(_ route: Int, to profile: Profile, at now: Instant) {
        self.catchUp(to: now)
        if self.links.switchRoute(route, to: profile, at: self.now) { self.cutAllConnections(.reset, route: route) }
        self.retargetRoutedFlows()
        self.scheduleRouteTick()
    }

    /// Applies a live change to route `route` (a path index) from `now`.
    public func change(route: Int, _ change: RouteChange, at now: Instant) {
        switch change {
        case .outage(let outage): self.setOutage(outage, route: route, at: now)
        case .stall(let stall): self.setStall(stall, route: route, at: now)
        case .link(let profile):
            self.switchRoute(route, to: self.links.pathRoutes[route].withLink(of: profile), at: now)
        }
    }

    // MARK: - Routes' timelines

    /// Makes sure an event wakes the model when a route's timeline next changes.
    func scheduleRouteTick() {
        guard let next = self.links.nextRouteChange, next != self.scheduledRouteTick else { return }
        self.scheduledRouteTick = next
        self.schedule(.routeTick, at: next)
    }

    /// The routes' changes due now: a `reset` outage that begins cuts the route's connections.
    func routeTick() {
        if self.scheduledRouteTick == self.now { self.scheduledRouteTick = nil }
        for route in self.links.followRoutes(at: self.now) { self.cutAllConnections(.reset, route: route) }
        self.retargetRoutedFlows()
        self.scheduleRouteTick()
    }

    /// A profile switch's routes (see ``LinkNetwork/replaceRoutes(with:at:)``); open connections
    /// keep the path they took.
    func replaceRoutes(with routes: [Route]) {
        for route in self.links.replaceRoutes(with: routes, at: self.now) {
            self.cutAllConnections(.reset, route: route)
        }
        self.retargetRoutedFlows()
        self.scheduleRouteTick()
    }

    private func retargetRoutedFlows() {
        for flow in self.flows.values where flow.route != nil { self.retarget(flow) }
    }
}
