import NIOCore
import NIOHTTP1
import NIOPosix
import NetcondCore

/// netcond's built-in origin (`http://origin.netcond.test`): an HTTP/1.1 server on a loopback port in the netcond
/// process, serving deterministic files, status codes and delays, and logging every request for the checks.
///
/// ```swift
/// let origin = OriginServer()
/// let address = try await origin.start(group: group)      // 127.0.0.1:<ephemeral>
/// …
/// try await origin.stop()                                 // listener and every open connection closed
/// ```
public final class OriginServer: Sendable {
    public let configuration: OriginConfiguration
    /// Every request served, in arrival order.
    public let requestLog: OriginRequestLog

    private enum Phase {
        case idle
        case starting
        case running(Channel)
        case stopped
    }

    private struct State {
        var phase = Phase.idle
        /// Listeners added by ``addListener(group:host:port:prepare:)`` (the HTTPS one).
        var extraListeners: [Channel] = []
        var connections: [ObjectIdentifier: Channel] = [:]
        var nextConnectionID = 0
    }

    private let router: OriginRouter
    private let state = LockedBox(State())

    public init(configuration: OriginConfiguration = .init()) {
        self.configuration = configuration
        self.requestLog = OriginRequestLog()
        self.router = OriginRouter(configuration: configuration)
    }

    /// The address the listener is bound to, while running.
    public var localAddress: SocketAddress? {
        self.state.withLock { state in
            if case .running(let channel) = state.phase {
                return channel.localAddress
            }
            return nil
        }
    }

    /// Binds `host:port` (port 0 = ephemeral) on `group` and starts serving; returns the bound address.
    /// A server starts once; after ``stop()`` make a new one.
    public func start(group: EventLoopGroup, host: String = "127.0.0.1", port: Int = 0) async throws -> SocketAddress {
        try self.state.withLock { state in
            guard case .idle = state.phase else { throw OriginServerError.alreadyStarted }
            state.phase = .starting
        }
        let listener: Channel
        do {
            listener = try await self.bootstrap(group: group, prepare: nil).bind(host: host, port: port).get()
        } catch {
            self.state.withLock { $0.phase = .idle }
            throw error
        }
        await self.setCongestionControl(listener)
        let stillWanted = self.state.withLock { state in
            guard case .starting = state.phase else { return false }
            state.phase = .running(listener)
            return true
        }
        guard stillWanted, let address = listener.localAddress else {
            try? await listener.close()
            throw OriginServerError.stoppedWhileStarting
        }
        return address
    }

    /// Binds one more listener for the same origin while it runs — the same endpoints and request
    /// log — whose connections first go through `prepare` when there is one (which adds, say, a TLS
    /// handler in front of HTTP). Returns the bound address; ``stop()`` closes it with the rest.
    public func addListener(
        group: EventLoopGroup, host: String = "127.0.0.1", port: Int = 0,
        prepare: (@Sendable (Channel) throws -> Void)?
    ) async throws -> SocketAddress {
        let listener = try await self.bootstrap(group: group, prepare: prepare).bind(host: host, port: port).get()
        await self.setCongestionControl(listener)
        let kept = self.state.withLock { state in
            guard case .running = state.phase else { return false }
            state.extraListeners.append(listener)
            return true
        }
        guard kept, let address = listener.localAddress else {
            try? await listener.close()
            throw OriginServerError.stoppedWhileStarting
        }
        return address
    }

    /// Closes the extra listener bound to `address` (one ``addListener(group:host:port:prepare:)``
    /// made), as when its partner could not be bound.
    public func removeListener(at address: SocketAddress) async {
        let listener = self.state.withLock { state -> Channel? in
            guard let index = state.extraListeners.firstIndex(where: { $0.localAddress == address }) else { return nil }
            return state.extraListeners.remove(at: index)
        }
        try? await listener?.close()
    }

    /// Gives a new listener the configured congestion control, before any connection can arrive.
    /// Not fatal: an algorithm this kernel lacks leaves the host's default, and
    /// ``congestionControl()`` reads back what the connections are born with.
    private func setCongestionControl(_ listener: Channel) async {
        guard let name = self.configuration.congestionControl else { return }
        try? await SenderCongestionControl.set(name, on: listener).get()
    }

    /// A profile switch's routes: their faults from now on (only when made with `routes`).
    public func replaceRoutes(with routes: [Route]) {
        self.router.faults?.replaceRoutes(with: routes)
    }

    /// From now on the origin's new connections send with `name` (open ones keep theirs).
    public func setCongestionControl(_ name: String) async {
        let listeners: [Channel] = self.state.withLock { state in
            var channels = state.extraListeners
            if case .running(let channel) = state.phase { channels.insert(channel, at: 0) }
            return channels
        }
        for listener in listeners { try? await SenderCongestionControl.set(name, on: listener).get() }
    }

    /// The TCP congestion control the origin's connections send with, as the kernel reports it
    /// (nil: not running, or not readable).
    public func congestionControl() async -> String? {
        let listener: Channel? = self.state.withLock { state in
            if case .running(let channel) = state.phase { return channel }
            return nil
        }
        guard let listener else { return nil }
        return try? await SenderCongestionControl.get(from: listener).get()
    }

    /// Closes the listener and every open connection (in-flight responses are cut off, and logged as incomplete).
    /// Safe to call more than once.
    public func stop() async throws {
        let (listeners, connections) = self.state.withLock { state -> ([Channel], [Channel]) in
            var listeners = state.extraListeners
            if case .running(let channel) = state.phase {
                listeners.insert(channel, at: 0)
            }
            state.phase = .stopped
            state.extraListeners = []
            let connections = Array(state.connections.values)
            state.connections = [:]
            return (listeners, connections)
        }
        for listener in listeners {
            try await Self.closeIgnoringAlreadyClosed(listener)
        }
        for connection in connections {
            try await Self.closeIgnoringAlreadyClosed(connection)
        }
    }

    private func bootstrap(group: EventLoopGroup, prepare: (@Sendable (Channel) throws -> Void)?) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                self.initializeConnection(channel, prepare: prepare)
            }
    }

    private func initializeConnection(_ channel: Channel, prepare: (@Sendable (Channel) throws -> Void)?)
        -> EventLoopFuture<Void>
    {
        let key = ObjectIdentifier(channel)
        let connectionID: Int? = self.state.withLock { state in
            if case .stopped = state.phase { return nil }
            let id = state.nextConnectionID
            state.nextConnectionID += 1
            state.connections[key] = channel
            return id
        }
        guard let connectionID else {
            return channel.close()
        }
        channel.closeFuture.whenComplete { _ in
            self.state.withLock { state in
                _ = state.connections.removeValue(forKey: key)
            }
        }
        let handler = OriginHTTPHandler(
            router: self.router,
            log: self.requestLog,
            clock: self.configuration.clock,
            connectionID: connectionID,
            chunkSize: self.configuration.chunkSize,
            listenerPort: prepare != nil ? 443 : 80
        )
        self.requestLog.openConnection(
            id: connectionID, peerPort: channel.remoteAddress?.port, tls: prepare != nil,
            at: self.configuration.clock.now())
        let log = self.requestLog
        return channel.eventLoop.makeCompletedFuture {
            // At the socket end, in front of any TLS handler: what the socket accepted.
            try channel.pipeline.syncOperations.addHandler(
                WrittenByteCounter { log.addBytesWritten($0, connection: connectionID) })
            try prepare?(channel)
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
            try channel.pipeline.syncOperations.addHandler(handler)
        }
    }

    private static func closeIgnoringAlreadyClosed(_ channel: Channel) async throws {
        do {
            try await channel.close()
        } catch ChannelError.alreadyClosed {
            // Closed by the peer or by itself in the meantime: nothing to do.
        }
    }
}

/// Misuse of ``OriginServer``'s lifecycle.
public enum OriginServerError: Error, Hashable, Sendable {
    /// ``OriginServer/start(group:host:port:)`` was called on a server that was already started.
    case alreadyStarted
    /// ``OriginServer/stop()`` was called while the server was still binding.
    case stoppedWhileStarting
}

/// Counts the bytes the socket accepted (a write counts when its promise succeeds: a write still
/// pending when the connection dies never reached the peer).
final class WrittenByteCounter: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let count: (Int) -> Void

    init(count: @escaping (Int) -> Void) {
        self.count = count
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = self.unwrapOutboundIn(data).readableBytes
        let promise = promise ?? context.eventLoop.makePromise()
        promise.futureResult.assumeIsolated().whenSuccess { _ in self.count(bytes) }
        context.write(data, promise: promise)
    }
}
