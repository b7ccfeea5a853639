import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NetcondCore

/// One Toxiproxy proxy run as Toxiproxy runs it: each connection it accepts is joined to a new
/// connection to the upstream, made at once, and each of its two streams passes through the
/// proxy's toxics on its own (``ToxicRelayWiring``). An upstream that cannot be reached closes the
/// client's connection (a FIN, as Toxiproxy's `Close`); so does an upstream that is one of this
/// process's own listeners (a proxy pointed at itself, at another proxy that points back, or at the
/// API), with a line on stderr, instead of a loop that eats every descriptor and a core: an
/// upstream that resolves to one (``LoopRefusingResolver``) is not connected to at all; one that
/// reaches one all the same is closed once made, and its arrival at that listener is reset there
/// rather than relayed on (round again).
final class ToxicRelay: Sendable {
    let eventLoop: EventLoop
    private let name: String
    private let upstreamHost: String
    private let upstreamPort: Int
    let connections: NIOLoopBoundBox<ToxicConnections>
    private let listener = NIOLockedValueBox<Channel?>(nil)
    private let children = NIOLockedValueBox<[ObjectIdentifier: Channel]>([:])
    private let said = NIOLockedValueBox(false)
    /// Each read takes up to 32 KiB, as Toxiproxy's copy does: a chunk's size decides how a
    /// bandwidth toxic paces it and how much a limit or reset takes at once.
    private static let reads = FixedSizeRecvByteBufferAllocator(capacity: 32 * 1024)

    /// `seed`: the proxy's, for its connections' draws; `toxics`: those in force now.
    /// `tally`: where its connections count their bytes.
    init(
        name: String, upstream: (host: String, port: Int), seed: UInt64, toxics: [Toxic], eventLoop: EventLoop,
        tally: ToxicTally = ToxicTally()
    ) {
        self.name = name
        self.upstreamHost = upstream.host
        self.upstreamPort = upstream.port
        self.eventLoop = eventLoop
        self.connections = NIOLoopBoundBox.makeBoxSendingValue(
            ToxicConnections(seed: seed, toxics: toxics, tally: tally), eventLoop: eventLoop)
    }

    /// Listens at `host:port` (0: any free port); returns where.
    func start(host: String, port: Int) async throws -> SocketAddress {
        let loop = self.eventLoop
        let bootstrap = ServerBootstrap.proxyListener(on: loop)
            .childChannelOption(.autoRead, value: false)
            .childChannelOption(.recvAllocator, value: Self.reads)
            .childChannelSetUp { [self] channel in try self.accepted(channel) }
        let channel: Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            // Toxiproxy's (Go's) words, which clients and suites match.
            throw ProxyStartError(description: "listen tcp \(host):\(port): bind: address already in use")
        } catch {
            throw ProxyStartError(description: "cannot listen on \(host):\(port): \(ProxyServer.reason(error))")
        }
        guard let address = channel.localAddress else {
            try? await channel.close()
            throw ProxyStartError(description: "cannot listen on \(host):\(port): no local address")
        }
        self.listener.withLockedValue { $0 = channel }
        ProcessListeners.add(address, .proxy, name: "Toxiproxy proxy \(self.name)")
        return address
    }

    /// Closes the listener and every connection (Toxiproxy's disable and delete).
    func stop() async {
        let listener = self.listener.withLockedValue { channel in
            defer { channel = nil }
            return channel
        }
        if let address = listener?.localAddress { ProcessListeners.remove(address) }
        try? await listener?.close()
        let children = self.children.withLockedValue { Array($0.values) }
        for child in children { try? await child.close() }
    }

    private func accepted(_ client: Channel) throws {
        if ProcessListeners.arrivesFromLoop(client) {
            // One of netcond's own relays, whose upstream reached this listener, and which has
            // said so: reset (once the channel is up), as an unreachable upstream refuses.
            self.eventLoop.execute { client.resetConnection() }
            return
        }
        let id = ObjectIdentifier(client)
        self.children.withLockedValue { $0[id] = client }
        client.closeFuture.whenComplete { [children] _ in children.withLockedValue { $0[id] = nil } }
        let relay = try self.connections.value.attachRelay(to: client)
        // Every listener of netcond's: a proxy's (a loop) and an API's (nothing a Toxiproxy proxy
        // is for, and from another host a way into the API).
        let refused = ProcessListeners.addresses(.proxy) + ProcessListeners.addresses(.api)
        let bootstrap = ClientBootstrap(group: self.eventLoop)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelOption(.autoRead, value: false)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.recvAllocator, value: Self.reads)
            .connectTimeout(.seconds(30))
        let connecting = LoopRefusingResolver.connect(
            bootstrap, host: self.upstreamHost, port: self.upstreamPort, refusing: refused, on: self.eventLoop)
        connecting.assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let upstream):
                    guard client.isActive else {
                        upstream.close(promise: nil)
                        return
                    }
                    if let reached = ProcessListeners.listener(reachedBy: upstream, among: refused) {
                        ProcessListeners.noteLoop(upstream, reached: reached)
                        upstream.close(promise: nil)
                        client.close(promise: nil)
                        self.sayLoop(reached)
                        return
                    }
                    do {
                        let upstreamID = ObjectIdentifier(upstream)
                        self.children.withLockedValue { $0[upstreamID] = upstream }
                        upstream.closeFuture.whenComplete { [children = self.children] _ in
                            children.withLockedValue { $0[upstreamID] = nil }
                        }
                        try upstream.pipeline.syncOperations.addHandler(ToxicUpstreamSide(relay: relay))
                        relay.attachUpstream(upstream)
                    } catch {
                        upstream.close(promise: nil)
                        client.close(promise: nil)
                    }
                case .failure(let error):
                    // As Toxiproxy: the client's connection is closed (a FIN); so when the upstream
                    // is one of netcond's own listeners, and no connection was made.
                    client.close(promise: nil)
                    if let loop = LoopRefusingResolver.loop(in: error) { self.sayLoop(loop.listener) }
                }
            }
    }

    private func sayLoop(_ reached: SocketAddress) {
        let first = self.said.withLockedValue { said in
            defer { said = true }
            return !said
        }
        guard first else { return }
        let host = self.upstreamHost.contains(":") ? "[\(self.upstreamHost)]" : self.upstreamHost
        let line =
            "netcond: Toxiproxy proxy \(self.name): a loop: its upstream \(host):\(self.upstreamPort) is "
            + "\(ProcessListeners.describe(reached)), one of netcond's own listeners; its connections are closed "
            + "instead of going round (point its upstream at the server)\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
