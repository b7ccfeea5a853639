import DequeModule
import HeapModule

/// The whole network both engines drive: the access link every connection shares (``LinkPaths``,
/// kept in line with the profile's timeline by the engine) and, per ``Route``, a link of its own in
/// series behind it, with the route's own timeline (its schedule, stalls and outages).
///
/// ```
///  up:    offer ─▶ access path (up) ─▶ route's path (up) ─▶ deliver to the server's side
///  down:  offer ─▶ route's path (down) ─▶ access path (down) ─▶ deliver to the client's side
///         (no route: the access path alone)
/// ```
/// A unit that leaves its first path reaches the second at the moment it arrived; what it met on
/// the first (a changed byte, being a copy) stays with it. A unit the second path drops comes back
/// from ``popEvent(upTo:)`` as ``NetworkEvent/dropped(_:_:_:)``, when it happens: the engine then
/// treats it as lost (the stream engine's sender repairs it; the packet engine drops the packet).
///
/// Pure and in virtual time, as ``LinkPath``: every path sees its moments in order, because units
/// due to move on by a moment move before anything is offered at that moment.
public struct LinkNetwork<Unit, Connection: Hashable> {
    public typealias Carried = Hop<Unit, Connection>

    /// The access link: the profile's conditions, followed by the engine.
    public var access: LinkPaths<Carried, Connection>
    public private(set) var table: RouteTable
    /// Each route's paths and timeline, by path index (``pathOfRoute``).
    @usableFromInline var routePaths: [LinkPaths<Carried, Connection>]
    public private(set) var routeTimelines: [ConditionTimeline]
    /// When each route whose paths hold a unit due next delivers it, earliest first (ties: the
    /// lower route): finding the next event costs the same with one busy route or thousands. An
    /// entry whose route's next delivery has changed since is stale: it is dropped when it comes
    /// to the top (every mutating step leaves a fresh one there).
    @usableFromInline var dueRoutes = Heap<RouteDue>()
    /// Routes whose timeline has changes of its own to come (a schedule, stalls).
    private var timed: [Int] = []
    /// What reached its end (or was dropped on a second path) while units were moved on before an
    /// offer, in order; every one is due no later than anything still on a path.
    @usableFromInline var ready: Deque<(Instant, NetworkEvent<Unit>)> = []
    /// The device's radio (the profile's `radio:`), told of every unit that crosses the access
    /// link at the device's end: an up unit when it is offered, whatever its fate; a down unit when
    /// the access link delivers it. Nil: no radio. It observes; it decides nothing.
    public var radio: RadioModel?

    public init(access timeline: ConditionTimeline, routes: [Route], seed: UInt64) {
        self.seed = seed
        self.radio = timeline.profile.radio.map { RadioModel(spec: $0) }
        self.access = LinkPaths(timeline, seed: seed)
        self.table = RouteTable(routes)
        self.pathOfRoute = Array(routes.indices)
        self.pathRoutes = routes
        self.routeTimelines = routes.enumerated().map { $1.timeline(seed: SeedDeriver.route(seed, $0)) }
        self.routePaths = self.routeTimelines.enumerated().map { index, timeline in
            LinkPaths(timeline, seed: SeedDeriver.route(seed, index))
        }
        self.timed = routes.indices.filter { self.routeTimelines[$0].nextChange != nil }
        self.offeredAt += [Instant](repeating: .zero, count: 2 * routes.count)
        self.routeBytes += [Int64](repeating: 0, count: 2 * routes.count)
    }

    /// `at`, or the latest moment path `slot` was offered a unit at if that is later; noted.
    @inlinable
    mutating func moment(_ at: Instant, slot: Int) -> Instant {
        let moment = max(at, self.offeredAt[slot])
        self.offeredAt[slot] = moment
        return moment
    }

    /// The slot of a path in ``offeredAt``: the access link's (route nil) or a route's, one way.
    @inlinable
    static func slot(route: Int?, _ direction: Direction) -> Int {
        (route.map { 2 + 2 * $0 } ?? 0) + (direction == .up ? 0 : 1)
    }

    private let seed: UInt64
    /// The latest moment each path (access up, access down, then each route's up and down) was
    /// offered a unit at: a path's `now` never goes back, and two sources feed some paths (an
    /// engine's offers, and units moving on from their first path), so an offer is never earlier.
    @usableFromInline var offeredAt: [Instant] = [.zero, .zero]
    /// Bytes each route's units carried to their end, by slot as ``offeredAt`` (the access link's
    /// two slots unused): copies are not counted, nor units dropped on the way.
    @usableFromInline var routeBytes: [Int64] = [0, 0]
    /// The path of each route of ``table`` (a route's path index: what ``offer`` takes). A path
    /// outlives a profile switch that drops its route: what is on it still arrives.
    private var pathOfRoute: [Int]
    /// The route each path was made for (its latest conditions are its timeline's).
    public private(set) var pathRoutes: [Route]

    /// The routes in force, in the profile's order.
    public var routes: [Route] { self.table.routes }

    /// The path of each route in force, in the profile's order.
    public var routesInForce: [Int] { self.pathOfRoute }

    /// The path of the first route in force whose match holds for `target` (nil: none).
    public func route(for target: RouteTarget) -> Int? {
        self.table.route(for: target).map { self.pathOfRoute[$0] }
    }

    /// The path of the route in force whose hosts name `name` (``RouteTable/route(lookingUp:)``):
    /// the route a look-up of `name` meets.
    public func route(lookingUp name: String) -> Int? {
        self.table.route(lookingUp: name).map { self.pathOfRoute[$0] }
    }

    /// The path of the route in force called `name` (nil: none).
    public func route(named name: String) -> Int? {
        self.table.routes.firstIndex { $0.name == name }.map { self.pathOfRoute[$0] }
    }

    /// A route's paths by path index (its conditions, outage, counters).
    public func route(_ index: Int) -> LinkPaths<Carried, Connection> { self.routePaths[index] }

    /// The routes of a profile switched to, from `now`: a route of the same name keeps its path
    /// (and what is on it) under the new route's conditions; a new one gets a path of its own; a
    /// path whose route is gone carries what it holds to the end and takes no new connection.
    /// Returns the paths whose `reset` outage begins now (their connections are to be cut).
    public mutating func replaceRoutes(with routes: [Route], at now: Instant) -> [Int] {
        self.moveOn(upTo: now)
        var cut: [Int] = []
        var paths: [Int] = []
        for route in routes {
            if let index = self.route(named: route.name) {
                self.pathRoutes[index] = route
                self.routeTimelines[index].switchProfile(to: route.profile, at: now)
                self.routeTimelines[index].setOutage(route.outage, at: now)
                if self.apply(index, at: now) { cut.append(index) }
                paths.append(index)
            } else {
                let index = self.routePaths.count
                let timeline = route.timeline(seed: SeedDeriver.route(self.seed, index), at: now)
                self.routeTimelines.append(timeline)
                self.routePaths.append(LinkPaths(timeline, seed: SeedDeriver.route(self.seed, index)))
                self.pathRoutes.append(route)
                self.offeredAt += [now, now]
                self.routeBytes += [0, 0]
                paths.append(index)
            }
        }
        self.table = RouteTable(routes)
        self.pathOfRoute = paths
        self.timed = self.routeTimelines.indices.filter { self.routeTimelines[$0].nextChange != nil }
        return cut
    }

    // MARK: - Offer

    /// A unit reaches the network at `now` in `direction`, on `route` (nil: none). Returns what
    /// its first path decided: a drop there, or `.held` when it has a second path to cross (its
    /// fate is known when it reaches the end) or waits for a stall.
    @inlinable
    public mutating func offer(
        _ unit: Unit, _ direction: Direction, route: Int?, bytes: Int, connection: Connection?,
        extraDelay: Span = .zero, at now: Instant
    ) -> PathAdmission {
        self.moveOn(upTo: now)
        let hop = Hop(
            unit: unit, route: route.map { Int32($0) } ?? -1, final: route == nil, bytes: Int32(clamping: bytes),
            connection: connection, corruptByte: nil, isCopy: false)
        // The first path: the access link's, or (down) the route's.
        let first = direction == .up ? nil : route
        let at = self.moment(now, slot: Self.slot(route: first, direction))
        if direction == .up { self.radio?.note(at: at) }
        guard let route else {
            return self.access[direction].offer(
                hop, bytes: bytes, connection: connection, extraDelay: extraDelay, at: at)
        }
        let admission: PathAdmission
        if direction == .up {
            admission = self.access[.up].offer(
                hop, bytes: bytes, connection: connection, extraDelay: extraDelay, at: at)
        } else {
            let before = self.routePaths[route].nextDelivery
            admission = self.routePaths[route][.down].offer(
                hop, bytes: bytes, connection: connection, extraDelay: extraDelay, at: at)
            self.noteRoute(route, before: before)
        }
        if case .dropped = admission { return admission }
        return .held
    }

    // MARK: - Delivery

    /// When the next event is due (nil: none, or every unit held by a stall).
    @inlinable
    public var nextDelivery: Instant? {
        if let first = self.ready.first { return first.0 }
        return Instant.earliest(self.access.nextDelivery, self.dueRoutes.min?.at)
    }

    /// The next unit that reached its end (or was dropped on its second path) by `now`, in time order.
    @inlinable
    public mutating func popEvent(upTo now: Instant) -> NetworkEvent<Unit>? {
        if let first = self.ready.popFirst() { return first.1 }
        while let (at, event) = self.step(upTo: now) {
            if let event { return event }
            _ = at
        }
        return nil
    }

    /// Moves every unit due by `now` on to its second path; what reaches its end meanwhile waits in
    /// ``ready``.
    @inlinable
    mutating func moveOn(upTo now: Instant) {
        while let (at, event) = self.step(upTo: now) {
            if let event { self.ready.append((at, event)) }
        }
    }

    /// Takes the earliest unit due by `now` off its path: a unit at its end is returned as an
    /// event; one with a second path to cross is offered there (nil event). Nil: nothing due.
    @inlinable
    mutating func step(upTo now: Instant) -> (Instant, NetworkEvent<Unit>?)? {
        var source: Int? = nil  // nil: the access link; else a route
        var earliest = self.access.nextDelivery
        // Ties go to the access link, then to the lower route: the same seed gives the same order.
        if let due = self.dueRoutes.min, earliest.map({ due.at < $0 }) ?? true {
            earliest = due.at
            source = Int(due.route)
        }
        guard let at = earliest, at <= now else { return nil }
        let popped: (Direction, PathDelivery<Carried>)?
        if let source {
            _ = self.dueRoutes.removeMin()
            popped = self.routePaths[source].popDelivery(upTo: at)
            self.noteRoute(source, before: nil)
        } else {
            popped = self.access.popDelivery(upTo: at)
        }
        guard let (direction, delivery) = popped else { return (at, nil) }
        // Down, the access link is the last path: the unit reaches the device.
        if source == nil, direction == .down { self.radio?.note(at: delivery.at) }
        var hop = delivery.unit
        hop.corruptByte = hop.corruptByte ?? delivery.corruptByte
        hop.isCopy = hop.isCopy || delivery.isCopy
        if hop.final {
            if hop.route >= 0 && !hop.isCopy {
                self.routeBytes[Self.slot(route: Int(hop.route), direction)] += Int64(hop.bytes)
            }
            let out = PathDelivery(unit: hop.unit, at: delivery.at, corruptByte: hop.corruptByte, isCopy: hop.isCopy)
            return (at, .delivered(direction, out))
        }
        hop.final = true
        let route = Int(hop.route)
        let admission: PathAdmission
        let second = self.moment(delivery.at, slot: Self.slot(route: direction == .up ? route : nil, direction))
        if direction == .up {
            let before = self.routePaths[route].nextDelivery
            admission = self.routePaths[route][.up].offer(
                hop, bytes: Int(hop.bytes), connection: hop.connection, at: second)
            self.noteRoute(route, before: before)
        } else {
            admission = self.access[.down].offer(
                hop, bytes: Int(hop.bytes), connection: hop.connection, at: second)
        }
        // A copy (the first path's duplicate) the second drops is nothing to report: its original
        // has a fate of its own, and an engine would drop (or repair) the original's unit.
        if case .dropped(let why) = admission, !hop.isCopy { return (at, .dropped(direction, hop.unit, why)) }
        return (at, nil)
    }

    /// A profile switch's radio from `now`: new constants, the state kept (nil: the radio in
    /// force stays; a run without one gets one, idle until then).
    public mutating func switchRadio(to spec: RadioSpec?, at now: Instant) {
        guard let spec else { return }
        if self.radio == nil { self.radio = RadioModel(spec: spec) }
        self.radio?.switchSpec(to: spec, at: now)
    }

    // MARK: - Routes' timelines

    /// When a route's timeline next changes by itself (nil: none does).
    public var nextRouteChange: Instant? {
        var next: Instant? = nil
        for route in self.timed { next = Instant.earliest(next, self.routeTimelines[route].nextChange) }
        return next
    }

    /// Applies every route's change due by `moment` (the caller took what was due before it).
    /// Returns the routes whose outage became `reset` (their connections are to be cut).
    public mutating func followRoutes(at moment: Instant) -> [Int] {
        var cut: [Int] = []
        for route in self.timed where (self.routeTimelines[route].nextChange.map { $0 <= moment } ?? false) {
            self.routeTimelines[route].advance(to: moment)
            if self.apply(route, at: moment) { cut.append(route) }
        }
        return cut
    }

    /// Starts (or with nil ends) an outage on one route from `now`. Returns whether it is a reset
    /// that starts now (the route's connections are to be cut).
    public mutating func setOutage(_ outage: OutageBehaviour?, route: Int, at now: Instant) -> Bool {
        self.moveOn(upTo: now)
        self.routeTimelines[route].setOutage(outage, at: now)
        return self.apply(route, at: now)
    }

    /// Stalls one route (or with nil ends its live stall) from `now`.
    public mutating func setStall(_ stall: StallDirection?, route: Int, at now: Instant) {
        self.moveOn(upTo: now)
        self.routeTimelines[route].setStall(stall, at: now)
        _ = self.apply(route, at: now)
    }

    /// New conditions for one route from `now` (its link, schedule and stalls: `profile`'s).
    public mutating func switchRoute(_ route: Int, to profile: Profile, at now: Instant) -> Bool {
        self.moveOn(upTo: now)
        self.routeTimelines[route].switchProfile(to: profile, at: now)
        if self.routeTimelines[route].nextChange != nil, !self.timed.contains(route) { self.timed.append(route) }
        return self.apply(route, at: now)
    }

    private mutating func apply(_ route: Int, at moment: Instant) -> Bool {
        let before = self.routePaths[route].outage
        let due = self.routePaths[route].nextDelivery
        self.routePaths[route].follow(self.routeTimelines[route], at: moment)
        // A stall's start or end changes when the route next delivers.
        self.noteRoute(route, before: due)
        let after = self.routePaths[route].outage
        return after != before && after == .reset
    }

    /// Route `path` as it stands at `now`: the route, its state, each direction's link now.
    public func view(ofRoute path: Int, at now: Instant) -> RouteView {
        let timeline = self.routeTimelines[path]
        return RouteView(
            route: self.pathRoutes[path], state: timeline.state, down: timeline.moment(.down, at: now),
            up: timeline.moment(.up, at: now),
            delivered: (
                up: self.routeBytes[Self.slot(route: path, .up)], down: self.routeBytes[Self.slot(route: path, .down)]
            ))
    }

    /// Route `route`'s paths changed (`before`: when they next delivered then, nil when no entry
    /// says so any more): a fresh entry when that moment moved, and none stale at the top.
    @inlinable
    mutating func noteRoute(_ route: Int, before: Instant?) {
        if let next = self.routePaths[route].nextDelivery, next != before {
            self.dueRoutes.insert(RouteDue(at: next, route: Int32(route)))
        }
        while let top = self.dueRoutes.min, self.routePaths[Int(top.route)].nextDelivery != top.at {
            _ = self.dueRoutes.removeMin()
        }
    }

    /// The outage in force on route `index` (nil: none, or no route).
    public func outage(route index: Int?) -> OutageBehaviour? {
        guard let index else { return nil }
        return self.routePaths[index].outage
    }

    /// The round trip a connection on `route` meets from `now`: the access link's and the route's.
    public func roundTrip(route: Int?, from now: Instant) -> Span {
        let access = self.access.conditions.roundTrip(from: now)
        guard let route else { return access }
        return access + self.routePaths[route].conditions.roundTrip(from: now)
    }

    /// One direction's way for a connection on `route`: its delay in force at `now` (as ``delay(_:route:at:)``)
    /// and each path's jitter, the access link's and the route's (zero without one), which each path
    /// draws on top of its delay. Each path's conditions are read once (this is per segment).
    public func way(_ direction: Direction, route: Int?, at now: Instant) -> (
        delay: Span, accessJitter: Span, routeJitter: Span
    ) {
        let access = self.access.conditions.direction(direction)
        guard let route else { return (access.delay(at: now), access.jitter, .zero) }
        let beyond = self.routePaths[route].conditions.direction(direction)
        return (access.delay(at: now) + beyond.delay(at: now), access.jitter, beyond.jitter)
    }

    /// One direction's delay in force at `now` for a connection on `route`.
    public func delay(_ direction: Direction, route: Int?, at now: Instant) -> Span {
        let access = self.access.conditions.direction(direction).delay(at: now)
        guard let route else { return access }
        return access + self.routePaths[route].conditions.direction(direction).delay(at: now)
    }
}

/// One route as it stands at a moment, for status and reports.
public struct RouteView: Sendable {
    public init(
        route: Route, state: LinkState, down: LinkMoment, up: LinkMoment, delivered: (up: Int64, down: Int64) = (0, 0)
    ) {
        self.route = route
        self.state = state
        self.down = down
        self.up = up
        self.delivered = delivered
    }

    public var route: Route
    /// Its link's phase (its profile's name, or its schedule phase's), outage and stalls.
    public var state: LinkState
    public var down: LinkMoment
    public var up: LinkMoment
    /// Bytes the route's units carried to their end so far, each way (the engine's units: a
    /// packet's bytes on the wire in the packet engine, segments' payload in the stream engine).
    public var delivered: (up: Int64, down: Int64)
}

/// When a route next delivers (an entry of ``LinkNetwork/dueRoutes``), earliest first, then the lower route.
@usableFromInline
struct RouteDue: Comparable {
    @usableFromInline var at: Instant
    @usableFromInline var route: Int32

    @usableFromInline
    init(at: Instant, route: Int32) {
        self.at = at
        self.route = route
    }

    @usableFromInline
    static func < (a: RouteDue, b: RouteDue) -> Bool { (a.at, a.route) < (b.at, b.route) }
}

/// A unit as the network carries it: on which route, whether the path it is on is its last, and
/// what it met on the way so far.
public struct Hop<Unit, Connection> {
    public var unit: Unit
    /// The route's index (-1: none).
    @usableFromInline var route: Int32
    /// On its last path.
    @usableFromInline var final: Bool
    @usableFromInline var bytes: Int32
    @usableFromInline var connection: Connection?
    @usableFromInline var corruptByte: Int?
    @usableFromInline var isCopy: Bool

    @inlinable
    init(
        unit: Unit, route: Int32, final: Bool, bytes: Int32, connection: Connection?, corruptByte: Int?, isCopy: Bool
    ) {
        self.unit = unit
        self.route = route
        self.final = final
        self.bytes = bytes
        self.connection = connection
        self.corruptByte = corruptByte
        self.isCopy = isCopy
    }
}

/// What the network did with a unit, when it happened.
public enum NetworkEvent<Unit> {
    /// It reached its end.
    case delivered(Direction, PathDelivery<Unit>)
    /// Its second path dropped it (the first path's drops are the offer's answer).
    case dropped(Direction, Unit, PathDrop)
}
