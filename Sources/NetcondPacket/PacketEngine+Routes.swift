import NetcondCore

/// The routes as the engine's thread last published them, read from any thread: each route's state
/// and link now (`GET /routes`), and a route's path by name (a live change).
extension PacketEngine {
    /// Each route in force, in the profile's order, with its path index, as it stood when the
    /// engine last published.
    public func routeViews() -> [(path: Int, view: RouteView)] {
        guard let routes = self.routesSnapshot() else { return [] }
        let now = Instant(nanoseconds: self.summary().elapsed.nanoseconds)
        return routes.inForce.map { path in
            let timeline = routes.timelines[path]
            let view = RouteView(
                route: routes.routes[path], state: timeline.state, down: timeline.moment(.down, at: now),
                up: timeline.moment(.up, at: now))
            return (path, view)
        }
    }

    /// The path of the route in force called `name`, and the route as the profile gave it (nil: none).
    public func route(named name: String) -> (path: Int, route: Route)? {
        guard let routes = self.routesSnapshot(),
            let path = routes.inForce.first(where: { routes.routes[$0].name == name })
        else { return nil }
        return (path, routes.routes[path])
    }

    /// The names of the routes in force.
    public var routeNames: [String] {
        guard let routes = self.routesSnapshot() else { return [] }
        return routes.inForce.map { routes.routes[$0].name }
    }
}

/// What ``PacketEngine`` publishes of its routes.
struct PublishedRoutes: Sendable {
    var timelines: [ConditionTimeline]
    var routes: [Route]
    var inForce: [Int]
}
