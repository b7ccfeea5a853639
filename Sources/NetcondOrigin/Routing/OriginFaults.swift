import NIOHTTP1
import NetcondCore

/// The origin's own faults (`origin.faults` in a scenario): the same ``FaultPlan`` the proxy
/// decides with, over every request that reaches the origin, numbered per fault from the first.
final class OriginFaults: Sendable {
    private let plan: LockedBox<FaultPlan>
    private let clock: OriginClock
    private let started: Instant

    init(faults: [HTTPFault], seed: UInt64, clock: OriginClock) {
        self.plan = LockedBox(FaultPlan(faults: faults, seed: seed))
        self.clock = clock
        self.started = clock.now()
    }

    /// The action of the fault that hits `request`, if any (counted).
    func decide(_ request: OriginRequest) -> FaultAction? {
        let elapsed = self.clock.now() - self.started
        let host = request.headers.first(name: "host").map(Self.hostWithoutPort) ?? OriginHost.name
        let path = Self.originForm(request.target)
        let faultRequest = FaultRequest(method: request.method.rawValue, host: host, path: path)
        return self.plan.withLock { $0.decide(faultRequest, at: elapsed)?.fault.action }
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
        return rest.firstIndex(where: { $0 == "/" || $0 == "?" }).map { String(rest[$0...]) } ?? "/"
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
            break
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
