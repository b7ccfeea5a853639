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

extension ProxyServer: ControlTarget {
    /// The change runs on the proxy's loop, so the link changes at once, in order.
    public func controlAnswer(_ route: ControlAPI.Route) async -> (status: Int, json: [UInt8]) {
        do {
            return try await self.eventLoop.submit { () -> (status: Int, json: [UInt8]) in self.controlAnswerOnLoop(route) }.get()
        } catch {
            return (500, ControlError(error: "the proxy has stopped").controlJSON())
        }
    }
}

/// Serves `ControlAPI` over HTTP/1.1 on a loopback port. Requests are read and decoded (a profile
/// of hundreds of KB takes a while) on a loop of their own; only the change itself runs on the
/// target's own thread (the proxy's loop), so traffic is not held up by control work.
public final class ControlServer: Sendable {
    private let target: any ControlTarget
    private let server: NIOLockedValueBox<JSONHTTPServer?> = NIOLockedValueBox(nil)

    public init(proxy: ProxyServer) {
        self.target = proxy
    }

    public init(target: any ControlTarget) {
        self.target = target
    }

    /// Binds `host:port` (0 = any free port) and returns the address. Requests a web page could
    /// send are refused (`ControlAccess`); `host` is the one name besides localhost that `Host` may say.
    public func start(host: String, port: Int) async throws -> SocketAddress {
        let target = self.target
        let access = ControlAccess(listenHost: HostAddress.isIPLiteral(HostAddress.unbracketed(host)) ? nil : host)
        let server = JSONHTTPServer(maxBodyBytes: ControlAPI.maxBodyBytes) { request in
            let route: Result<ControlAPI.Route, ControlAPI.Rejection>
            if let refusal = access.check(
                method: request.method, target: request.target, headers: request.headers,
                hasBody: !request.body.isEmpty || request.tooLarge)
            {
                route = .failure(refusal)
            } else if request.tooLarge {
                route = .failure(ControlAPI.tooLarge)
            } else {
                route = ControlAPI.route(method: request.method, target: request.target, body: request.body)
            }
            switch route {
            case .failure(let rejection):
                return JSONHTTPResponse(status: rejection.status, json: ControlError(error: rejection.message).controlJSON())
            case .success(.dashboard):
                return Dashboard.response
            case .success(let route):
                let answer = await target.controlAnswer(route)
                return JSONHTTPResponse(status: answer.status, json: answer.json)
            }
        }
        self.server.withLockedValue { $0 = server }
        return try await server.start(host: host, port: port, what: "control")
    }

    public func stop() async {
        let server = self.server.withLockedValue { server in
            defer { server = nil }
            return server
        }
        await server?.stop()
    }
}
