import NIOCore
import NIOHTTP1
import NIOPosix
import NetcondCore

/// The captive portal's HTTPS side for `https: wrong-certificate`: a TLS server on loopback that
/// presents a certificate for `portal.netcond.test` from a throwaway CA, whatever name the client
/// asked for, and serves the login page to a client that goes on anyway (`curl -k`). Intercepted
/// connections are sent here instead of to their target. Lives on its loop (the proxy's); started
/// on first use, closed with the proxy. The packet engine's portal binds one per address family
/// and sends intercepted connections to it by NAT.
public final class PortalTLSServer {
    private let eventLoop: EventLoop
    private let tls: any TLSProvider
    private let host: String
    private let port: Int
    private let onConnection: (@Sendable () -> Void)?
    private var address: EventLoopFuture<SocketAddress>?
    private var channel: Channel?

    /// `onConnection`: called (on the loop) for each connection the server accepts.
    public init(
        eventLoop: EventLoop, tls: any TLSProvider, host: String = "127.0.0.1", port: Int = 0,
        onConnection: (@Sendable () -> Void)? = nil
    ) {
        self.eventLoop = eventLoop
        self.tls = tls
        self.host = host
        self.port = port
        self.onConnection = onConnection
    }

    /// Where to connect (binding on first use).
    public func start() -> EventLoopFuture<SocketAddress> {
        if let address = self.address { return address }
        let loop = self.eventLoop
        let future: EventLoopFuture<SocketAddress>
        do {
            let identity = try self.tls.makeServerIdentity(
                authority: "netcond captive portal CA (untrusted)", names: [CaptivePortal.host])
            let bootstrap = ServerBootstrap(group: loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { [onConnection] channel in
                    onConnection?()
                    return channel.eventLoop.makeCompletedFuture {
                        try identity.addServerHandler(to: channel)
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(PortalPageHandler())
                    }
                }
            // Bound on this loop, whose thread the server lives on: its state is set there.
            future = bootstrap.bind(host: self.host, port: self.port).hop(to: loop).assumeIsolated().flatMapThrowing {
                channel in
                self.channel = channel
                guard let address = channel.localAddress else { throw ChannelError.unknownLocalAddress }
                return address
            }.nonisolated()
        } catch {
            future = loop.makeFailedFuture(error)
        }
        self.address = future
        return future
    }

    public func stop() {
        self.channel?.close(promise: nil)
        self.channel = nil
    }
}

/// Every request over the portal's TLS gets the login page.
private final class PortalPageHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private var keepAlive = true

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            CaptivePortal.loginPage(status: 200).write(to: context, keepAlive: self.keepAlive)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A client that rejects the certificate aborts the handshake: expected, nothing to report.
        context.close(promise: nil)
    }
}
