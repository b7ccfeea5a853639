import NIOHTTP1
import NetcondCore

/// The origin's own faults (`origin.faults` in a scenario): the same ``FaultPlan`` the proxy
/// decides with, over every request that reaches the origin, numbered per fault from the first.
final class OriginFaults: Sendable {
    /// The plan, and the routes whose requests a route's faults see (empty: none).
    private let plan: LockedBox<(plan: FaultPlan, routes: RouteTable)>
    private let faults: [HTTPFault]
    private let clock: OriginClock
    private let started: Instant

    /// `routes`: their faults come first, each seeing the requests whose host takes the route.
    init(faults: [HTTPFault], routes: [Route] = [], seed: UInt64, clock: OriginClock) {
        // Its own stream: the proxy's plan draws from the run's seed as it is.
        let plan = FaultPlan(faults: faults, routes: routes, seed: SeedDeriver.derive(seed, 0x0816))
        self.plan = LockedBox((plan, RouteTable(routes)))
        self.faults = faults
        self.clock = clock
        self.started = clock.now()
    }

    /// A profile switch's routes: their faults replace the old routes' (counts start over; the
    /// origin's own faults start over too, as a proxy's plan does on a switch).
    func replaceRoutes(with routes: [Route]) {
        self.plan.withLock { state in
            state.plan.replace(with: self.faults, routes: routes)
            state.routes = RouteTable(routes)
        }
    }

    /// The action of the fault that hits `request`, if any (counted).
    func decide(_ request: OriginRequest) -> FaultAction? {
        let elapsed = self.clock.now() - self.started
        let host = request.host ?? OriginHost.name
        let path = Self.originForm(request.target)
        var faultRequest = FaultRequest(method: request.method.rawValue, host: host, path: path)
        return self.plan.withLock { state in
            if !state.routes.isEmpty {
                let port = request.port ?? request.listenerPort
                faultRequest.port = port
                faultRequest.route = state.routes.route(for: RouteTarget(named: host, port: port))
            }
            return state.plan.decide(faultRequest, at: elapsed)?.fault.action
        }
    }

    /// `origin.netcond.test:8080` → `origin.netcond.test`; `[::1]:80` → `::1`.
    static func hostWithoutPort(_ host: String) -> String {
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            return String(host[host.index(after: host.startIndex)..<close])
        }
        return String(host.prefix { $0 != ":" })
    }

    /// The target's path and query: a proxy may forward the absolute form.
    static func originForm(_ target: String) -> String {
        guard let scheme = target.range(of: "://") else { return target }
        let rest = target[scheme.upperBound...]
        guard let start = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
        return rest[start] == "?" ? "/" + rest[start...] : String(rest[start...])
    }

    /// The host of an absolute-form target (`http://cdn.netcond.test:8080/x` → `cdn.netcond.test`).
    static func absoluteHost(_ target: String) -> String? {
        guard let scheme = target.range(of: "://") else { return nil }
        let authority = target[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" }
        let host = Self.hostWithoutPort(String(authority.split(separator: "@").last ?? ""))
        return host.isEmpty ? nil : host.lowercased()
    }
}

extension OriginResponse {
    /// The answer of a `status` fault: the endpoint is never called (the work is not done).
    static func fault(status code: Int, retryAfter: RetryAfter?, target: String) -> OriginResponse {
        var headers: HTTPHeaders = [:]
        if let retryAfter { headers.add(name: "Retry-After", value: retryAfter.headerValue) }
        let status = HTTPResponseStatus(statusCode: code)
        return .text(
            status, "netcond origin: \(code) \(status.reasonPhrase) (a fault, for \(target))\n", headers: headers)
    }

    /// Applies a fault's action to the endpoint's response (a `status` fault never gets here).
    mutating func apply(_ action: FaultAction) {
        switch action {
        case .status:
            preconditionFailure("a status fault answers instead of the endpoint")
        case .cut(let bytes, let end):
            self.cut = OriginResponse.Cut(after: bytes.bytes, end: end)
        case .hang:
            self.hang = true
        case .delay(let span):
            self.delay = max(self.delay ?? .zero, span)
        case .dropResponse:
            self.dropResponse = true
        case .slowClose(let span):
            self.slowClose = span
            self.headers.replaceOrAdd(name: "Connection", value: "close")
        }
    }
}
