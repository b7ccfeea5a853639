import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NetcondCore

/// What a control API drives: the proxy's link, or the packet engine's.
public protocol ControlTarget: Sendable {
    /// The answer to a routed request (status code and JSON body), after applying any change.
    func controlAnswer(_ route: ControlAPI.Route) async -> (status: Int, json: [UInt8])
}

extension ControlTarget {
    /// `GET /status` as a value (nil when the target could not answer).
    func controlStatus() async -> ControlStatus? {
        let answer = await self.controlAnswer(.status)
        guard answer.status == 200 else { return nil }
        return try? JSONDecoder().decode(ControlStatus.self, from: Data(answer.json))
    }

    /// `GET /routes` as values (none when the target has none or could not answer).
    func controlRoutes() async -> [ControlRoute] {
        let answer = await self.controlAnswer(.routes)
        guard answer.status == 200 else { return [] }
        return (try? JSONDecoder().decode(ControlRoutes.self, from: Data(answer.json)).routes) ?? []
    }
}

extension ProxyServer: ControlTarget {
    /// The change runs on the proxy's loop, so the link changes at once, in order.
    public func controlAnswer(_ route: ControlAPI.Route) async -> (status: Int, json: [UInt8]) {
        do {
            return try await self.eventLoop.submit { () -> (status: Int, json: [UInt8]) in
                self.controlAnswerOnLoop(route)
            }.get()
        } catch {
            return (500, ControlError(error: "the proxy has stopped").controlJSON())
        }
    }
}

/// Serves `ControlAPI` over HTTP/1.1 on a loopback port. Requests are read and decoded (a profile
/// of hundreds of KB takes a while) on a loop of their own; only the change itself runs on the
/// target's own thread (the proxy's loop), so traffic is not held up by control work.
///
/// It also keeps the run's recent history (``ControlHistory``), sampling `/status` twice a second
/// for as long as it runs, so that the dashboard opened late still draws what happened.
public final class ControlServer: Sendable {
    private let target: any ControlTarget
    private let server: NIOLockedValueBox<JSONHTTPServer?> = NIOLockedValueBox(nil)
    private let history = NIOLockedValueBox(ControlHistory())
    private let sampler: NIOLockedValueBox<Task<Void, Never>?> = NIOLockedValueBox(nil)
    private let metrics = MetricsExposition()

    /// During a scenario: who may change the conditions (nil: anyone who can connect, as under
    /// `netcond run PROFILE` and `netcond proxy`).
    public let guarding: ControlGuard?

    public init(proxy: ProxyServer, guarding: ControlGuard? = nil) {
        self.target = proxy
        self.guarding = guarding
    }

    public init(target: any ControlTarget, guarding: ControlGuard? = nil) {
        self.target = target
        self.guarding = guarding
    }

    /// Binds `host:port` (0 = any free port) and returns the address. Requests a web page could
    /// send are refused (`ControlAccess`); `host` is the one name besides localhost that `Host` may say.
    public func start(host: String, port: Int) async throws -> SocketAddress {
        let target = self.target
        let history = self.history
        let access = ControlAccess(listenHost: HostAddress.isIPLiteral(HostAddress.unbracketed(host)) ? nil : host)
        let guarding = self.guarding
        let metrics = self.metrics
        let server = JSONHTTPServer(maxBodyBytes: ControlAPI.maxBodyBytes) { request in
            var route: Result<ControlAPI.Route, ControlAPI.Rejection>
            if let refusal = access.check(
                method: request.method, target: request.target, headers: request.headers,
                hasBody: !request.body.isEmpty || request.tooLarge)
            {
                route = .failure(refusal)
            } else if request.tooLarge {
                route = .failure(ControlAPI.tooLarge)
            } else if ControlAPI.path(of: request.target) == "/metrics" {
                guard request.method == "GET" else {
                    let message = "\(request.method) /metrics is not supported; allowed: GET /metrics"
                    return JSONHTTPResponse(status: 405, json: ControlError(error: message).controlJSON())
                }
                return await Self.metricsAnswer(target: target, exposition: metrics)
            } else {
                route = ControlAPI.route(method: request.method, target: request.target, body: request.body)
            }
            if case .success(.command) = route, let guarding {
                if let refusal = guarding.check(headers: request.headers) {
                    route = .failure(refusal)
                } else {
                    guarding.record("\(request.method) \(request.path)" + Self.bodySummary(request.body))
                }
            }
            switch route {
            case .failure(let rejection):
                return JSONHTTPResponse(
                    status: rejection.status, json: ControlError(error: rejection.message).controlJSON())
            case .success(.dashboard):
                return Dashboard.response
            case .success(.history(let since)):
                return JSONHTTPResponse(status: 200, json: history.withLockedValue { $0.json(since: since) })
            case .success(let route):
                let answer = await target.controlAnswer(route)
                return JSONHTTPResponse(status: answer.status, json: answer.json)
            }
        }
        self.server.withLockedValue { $0 = server }
        let address = try await server.start(host: host, port: port, what: "control")
        if let guarding = self.guarding {
            let shown = host.contains(":") ? "[\(host)]" : host
            guarding.onListening?("http://\(shown):\(address.port ?? port)", guarding.token)
        }
        let sampler = Task {
            while !Task.isCancelled {
                if let status = await target.controlStatus() {
                    history.withLockedValue { $0.add(status) }
                }
                try? await Task.sleep(nanoseconds: UInt64(ControlHistory.interval * 1e9))
            }
        }
        self.sampler.withLockedValue { $0 = sampler }
        return address
    }

    /// `GET /metrics`: the counters `/status` and `/routes` answer now, and the checks of the last
    /// scenario this process ran, in Prometheus's text format.
    static func metricsAnswer(target: any ControlTarget, exposition: MetricsExposition) async -> JSONHTTPResponse {
        guard let status = await target.controlStatus() else {
            return JSONHTTPResponse(status: 503, json: ControlError(error: "the link has stopped").controlJSON())
        }
        let routes = await target.controlRoutes()
        let samples = ControlMetrics.samples(
            status: status, routes: routes, checks: ScenarioCheckBoard.shared.lastRun)
        return .metrics(exposition.publish(samples))
    }

    /// A change's body, short, for the verdict's note (` {"name": "none"}`).
    static func bodySummary(_ body: [UInt8]) -> String {
        guard !body.isEmpty else { return "" }
        let text = TerminalText.oneLine(String(decoding: body.prefix(200), as: UTF8.self))
        return " " + text + (body.count > 200 ? "…" : "")
    }

    public func stop() async {
        if let sampler = self.sampler.withLockedValue({ task in
            defer { task = nil }
            return task
        }) {
            sampler.cancel()
            await sampler.value
        }
        let server = self.server.withLockedValue { server in
            defer { server = nil }
            return server
        }
        await server?.stop()
    }
}
