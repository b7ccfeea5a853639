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
    private let channel: NIOLockedValueBox<Channel?> = NIOLockedValueBox(nil)

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
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(ControlHTTPHandler(target: target, access: access))
                }
            }
        let channel: Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            throw ProxyStartError(description: "cannot listen for control on \(host):\(port): \(ProxyServer.reason(error))")
        }
        self.channel.withLockedValue { $0 = channel }
        guard let address = channel.localAddress else {
            throw ProxyStartError(description: "cannot listen for control on \(host):\(port): no local address")
        }
        return address
    }

    public func stop() async {
        let channel = self.channel.withLockedValue { channel in
            defer { channel = nil }
            return channel
        }
        try? await channel?.close()
    }
}

private final class ControlHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let target: any ControlTarget
    private let access: ControlAccess
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(target: any ControlTarget, access: ControlAccess) {
        self.target = target
        self.access = access
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = []
            self.tooLarge = false
        case .body(var buffer):
            if self.body.count + buffer.readableBytes > ControlAPI.maxBodyBytes {
                self.tooLarge = true
            } else if let bytes = buffer.readBytes(length: buffer.readableBytes) {
                self.body += bytes
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let keepAlive = head.isKeepAlive
            let route: Result<ControlAPI.Route, ControlAPI.Rejection>
            let refusal = self.access.check(
                method: head.method.rawValue,
                target: head.uri,
                headers: head.headers.map { (name: $0.name, value: $0.value) },
                hasBody: !self.body.isEmpty || self.tooLarge
            )
            if let refusal {
                route = .failure(refusal)
            } else if self.tooLarge {
                route = .failure(ControlAPI.tooLarge)
            } else {
                route = ControlAPI.route(method: head.method.rawValue, target: head.uri, body: self.body)
            }
            self.body = []
            switch route {
            case .failure(let rejection):
                self.respond(context: context, status: rejection.status, json: ControlError(error: rejection.message).controlJSON(), keepAlive: keepAlive)
            case .success(let route):
                let target = self.target
                context.eventLoop.makeFutureWithTask { await target.controlAnswer(route) }
                    .assumeIsolated()
                    .whenComplete { result in
                        let answer = (try? result.get()) ?? (status: 500, json: ControlError(error: "netcond has stopped").controlJSON())
                        self.respond(context: context, status: answer.status, json: answer.json, keepAlive: keepAlive)
                    }
            }
        }
    }

    private func respond(context: ChannelHandlerContext, status: Int, json: [UInt8], keepAlive: Bool) {
        CannedResponse(status: status, headers: [("Cache-Control", "no-store")], body: json, contentType: "application/json")
            .write(to: context, keepAlive: keepAlive)
    }
}
