import CNetcondSystem
import NIOCore
import NIOPosix
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// Zero-copy pass-through for port forwards (issue 43): while nothing needs to see or shape a
/// forward's bytes (``SpliceDecision``), its connections skip NIO and the kernel moves their bytes
/// (splice(2), socket → pipe → socket, on a thread per connection: `netcond_relay_start`).
///
/// ```
///  accept (NIO) ─▶ child initializer, before NIO registers the socket:
///                   splice allowed? ─no─▶ NIO's path: LinkShaper, GlueHandler, UpstreamConnector
///                        │yes
///                   dup the socket (its descriptor read from NIO's channel: AcceptedDescriptor),
///                   connect the target, start the relay; the initializer fails, so NIO closes
///                   its own descriptor without ever having registered it
///  any control command (and stop) ─▶ every relay stops and hands back its sockets and the bytes
///                   still in its pipes; both sockets become NIO channels (withConnectedSocket)
///                   under the link, the pipes' bytes written first, in order
/// ```
/// Taking the socket before registration matters: a registered NIO channel reads everything
/// left on its socket once it sees the peer's FIN, whoever else reads it. Handing back before any
/// command applies puts every connection under the new conditions (a cut or a handover reaches
/// it too). A relay asked back while its upstream's connect is under way finishes the connect
/// first (relaying nothing meanwhile; the command does not wait for it), so the server sees one
/// connection. A relay whose connect fails gives its client to NIO's path with that failure as its
/// connect's outcome (not connected again), which reports and answers it as it always does.
extension ProxyServer {
    /// Sets up an accepted client's connection (the forward's or the proxy's handlers).
    typealias ClientSetUp = @Sendable (Channel, State, UpstreamConnector) throws -> Void

    /// Called in a forward's child initializer, before NIO registers `channel`: true when the
    /// connection now belongs to a relay (the caller then fails the initializer, and NIO closes
    /// its descriptor).
    func spliceIfAllowedOnLoop(_ channel: Channel, forward: PortForward, setUp: @escaping ClientSetUp) -> Bool {
        let s = self.state.value
        let target = try? SocketAddress(ipAddress: forward.targetHost, port: forward.targetPort)
        var conditions = SpliceDecision.Conditions()
        conditions.enabled = self.configuration.splicesPassThrough
        conditions.profileIsPassThrough = s.profile.isPassThrough
        conditions.linkIsTransparent = s.driver?.model.isTransparent ?? true
        conditions.faults = s.rules.plan.rules.count
        conditions.watchedByHook =
            self.configuration.forwardConnectionHook != nil || self.configuration.forwardClosesOnUpstreamFailure
        conditions.targetIsAddress = target != nil
        conditions.targetIsOwnListener =
            target.map {
                SpliceDecision.isOwnListener(
                    $0, among: ProcessListeners.addresses(.proxy) + ProcessListeners.addresses(.api))
            } ?? false
        conditions.accepting = !s.stopping && (channel.parent?.isActive ?? false)
        conditions.relays = s.relays.count
        conditions.connections = s.children.count + s.adopting
        conditions.descriptorLimit = SpliceDecision.processDescriptorLimit() ?? Int.max
        if !s.relays.isEmpty && SpliceDecision.descriptorsShort(conditions) {
            // Near the limit: the relays' descriptors go back to the connections that need them
            // (one whose connect is under way stays until it is made: still counted as a relay).
            self.reclaimAllRelaysOnLoop(adopt: true)
            conditions.relays = s.relays.count
            conditions.connections = s.children.count + s.adopting
        }
        // A connection of netcond's own that came back to it is reset by the ordinary path.
        guard SpliceDecision.refusal(conditions) == nil, !ProcessListeners.arrivesFromLoop(channel), let target,
            let local = channel.localAddress, let peer = channel.remoteAddress
        else { return false }
        guard let descriptor = AcceptedDescriptor.of(channel) else { return false }
        let client = local.withSockAddr { local, _ in
            peer.withSockAddr { peer, _ in netcond_take_socket(descriptor, local, peer) }
        }
        guard client >= 0 else { return false }
        let upstream = target.withSockAddr { address, length in netcond_connect_socket(address, socklen_t(length)) }
        guard upstream >= 0 else {
            close(client)  // NIO's path connects and reports the failure
            return false
        }
        s.nextRelay += 1
        let notice = RelayNotice(server: self, id: s.nextRelay, totals: s.stats.spliced)
        let context = Unmanaged.passRetained(notice).toOpaque()
        let relay = netcond_relay_start(
            client, upstream, s.stats.spliced.pointer,
            { context, _ in
                guard let context else { return }
                let notice = Unmanaged<RelayNotice>.fromOpaque(context).takeRetainedValue()
                notice.server.eventLoop.execute { notice.server.reclaimRelayOnLoop(notice.id, adopt: true) }
            }, context)
        guard let relay else {
            Unmanaged<RelayNotice>.fromOpaque(context).release()
            close(client)
            close(upstream)
            return false
        }
        s.stats.connections += 1
        s.stats.splicedConnections += 1
        let record = s.rules.beginClient(at: self.eventLoop.now)
        s.relays[notice.id] = SplicedConnection(relay: relay, record: record, setUp: setUp)
        return true
    }

    /// Stops every relay and puts its connection under NIO (`adopt`), or closes it (the proxy stops).
    /// Every relay is asked first, so that they stop together.
    func reclaimAllRelaysOnLoop(adopt: Bool) {
        let ids = self.state.value.relays.keys.sorted()
        for id in ids { self.state.value.relays[id].map { netcond_relay_ask_back($0.relay) } }
        for id in ids { self.reclaimRelayOnLoop(id, adopt: adopt) }
    }

    /// Takes relay `id` back (it ended, or is stopped now): its counts go to the client's record;
    /// sockets it hands back become NIO channels (`adopt`) or are closed. A relay asked back while
    /// its upstream's connect is under way stays until that is over (`adopt`; its `ended` call
    /// comes back here): nothing was relayed meanwhile, and the server sees one connection.
    func reclaimRelayOnLoop(_ id: Int, adopt: Bool) {
        let s = self.state.value
        guard let entry = s.relays[id] else { return }
        guard case .done(let handBack, let up, let down) = RelayHandBack.reclaim(entry.relay, waitingForConnect: adopt)
        else { return }
        s.relays.removeValue(forKey: id)
        let record = entry.record
        record.bytesFromClient += up + Int64(handBack?.up.count ?? 0)
        record.downWritten += down
        if down > 0 { record.noteDelivered(Int(down), at: self.eventLoop.now) }
        if handBack.map({ $0.upstreamFD >= 0 }) ?? true {
            // Its connect was made: an attempt the link counts (`connect_hold`'s first N), as it
            // counts those of the ordinary path. A failed one is counted there, where it goes.
            s.driver?.model.noteConnectAttempt()
        }
        guard let handBack, adopt else {
            // The relay ended, or netcond stops: the connection ends here.
            if let handBack {
                close(handBack.clientFD)
                if handBack.upstreamFD >= 0 { close(handBack.upstreamFD) }
            } else {
                record.answered = record.answered || down > 0
            }
            record.upstreamAttempted = true
            s.rules.finishClient(record, at: self.eventLoop.now)
            return
        }
        if handBack.upstreamFD >= 0 {
            record.upstreamAttempted = true
            self.adoptPairOnLoop(handBack, record: record)
        } else {
            self.adoptClientOnLoop(
                handBack.clientFD, record: record, failedConnect: handBack.connectFailure, setUp: entry.setUp)
        }
    }

    /// A relay's connected pair under NIO: the client's channel behind the link (as a forward's),
    /// the pipes' bytes first, then both read again.
    private func adoptPairOnLoop(_ handBack: RelayHandBack, record: ClientConnectionRecord) {
        let loop = self.eventLoop
        let s = self.state.value
        let shaper = LinkShaper(driver: s.driver, stats: s.stats, record: record)
        let (clientGlue, upstreamGlue) = GlueHandler.matchedPair()
        let handlers = NIOLoopBound((shaper, clientGlue, upstreamGlue), eventLoop: loop)
        let bootstrap = ClientBootstrap(group: loop)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelOption(.autoRead, value: false)
        let upstreamFuture = bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handlers.value.2) }
        }.withConnectedSocket(handBack.upstreamFD)
        let clientFuture = bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandlers([handlers.value.0, handlers.value.1])
            }
        }.withConnectedSocket(handBack.clientFD)
        let state = self.state
        s.adopting += 1
        upstreamFuture.and(clientFuture).assumeIsolated().whenComplete { result in
            state.value.adopting -= 1
            guard case .success(let (upstream, client)) = result else {
                upstreamFuture.whenSuccess { $0.close(promise: nil) }
                clientFuture.whenSuccess { $0.close(promise: nil) }
                state.value.rules.finishClient(record, at: loop.now)
                return
            }
            self.keepOnLoop(client, record: record)
            shaper.beginShaping()
            if !handBack.up.isEmpty {
                state.value.stats.bytesUp += Int64(handBack.up.count)
                upstream.writeAndFlush(ByteBuffer(bytes: handBack.up), promise: nil)
            }
            if !handBack.down.isEmpty { client.writeAndFlush(ByteBuffer(bytes: handBack.down), promise: nil) }
            for channel in [upstream, client] {
                channel.setOption(.autoRead, value: true).whenFailure { _ in channel.close(promise: nil) }
            }
        }
    }

    /// A client whose upstream's connect failed: set up as its forward sets up every connection,
    /// its connect's outcome that failure (`failedConnect`; not made again), so that the client
    /// meets what the ordinary path does on such a failure, at the same time.
    private func adoptClientOnLoop(
        _ fd: Int32, record: ClientConnectionRecord, failedConnect: Error?, setUp: @escaping ClientSetUp
    ) {
        let loop = self.eventLoop
        let boundRecord = NIOLoopBound(record, eventLoop: loop)
        let state = self.state
        state.value.adopting += 1
        ClientBootstrap(group: loop)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        SetUpWhenActive { channel in
                            try self.setUpClientOnLoop(
                                channel, record: boundRecord.value, failedConnect: failedConnect, setUp: setUp)
                        })
                }
            }
            .withConnectedSocket(fd)
            .assumeIsolated()
            .whenComplete { result in
                state.value.adopting -= 1
                if case .failure = result { state.value.rules.finishClient(boundRecord.value, at: loop.now) }
            }
    }

    /// Sets up an accepted client's connection (`record`: one a relay had, else a new one;
    /// `failedConnect`: its relay's connect failed so, the real connect's outcome).
    func setUpClientOnLoop(
        _ channel: Channel, record: ClientConnectionRecord?, failedConnect: Error? = nil, setUp: ClientSetUp
    ) throws {
        let loop = self.eventLoop
        let configuration = self.configuration
        if record == nil && ProcessListeners.arrivesFromLoop(channel) {
            // One of netcond's own connections, closed as it found it loops: reset.
            loop.execute { channel.resetConnection() }
            return
        }
        let state = self.state.value
        let client: ClientConnectionRecord
        if let record {
            client = record
        } else {
            state.stats.connections += 1
            client = state.rules.beginClient(at: loop.now)
        }
        self.keepOnLoop(channel, record: client)
        try channel.pipeline.syncOperations.addHandler(ClientByteCounter(record: client))
        var overrides = HostOverrides()
        overrides.netcondTest = configuration.originAddress
        if let origin = configuration.originAddress { overrides.exact[OriginHost.name] = origin }
        overrides.originTLS = configuration.originTLSAddress
        var connector = UpstreamConnector(
            eventLoop: loop,
            driver: state.driver,
            overrides: overrides,
            stats: state.stats,
            rules: state.rules,
            client: client,
            // Every proxy of this process (a loop) and, for a client from another
            // host, every API (the control API included: it registers itself).
            listeners: ProcessListeners.refused(to: channel.remoteAddress)
        )
        if let failedConnect {
            connector.connectOverride = { _ in loop.makeFailedFuture(failedConnect) }
        }
        try setUp(channel, state, connector)
    }

    /// Counts a client's channel among the open ones until it closes, when its record is finished.
    private func keepOnLoop(_ channel: Channel, record: ClientConnectionRecord) {
        let state = self.state.value
        let id = ObjectIdentifier(channel)
        state.children[id] = channel
        let rules = state.rules
        let loop = self.eventLoop
        channel.closeFuture.assumeIsolated().whenComplete { _ in
            state.children.removeValue(forKey: id)
            rules.finishClient(record, at: loop.now)
        }
    }
}

extension ServerBootstrap {
    /// As ``childChannelSetUp(_:)``, but `takeOver` first sees each accepted connection before
    /// NIO registers it: when it returns true the connection is no longer NIO's (a splice relay
    /// has it) and the initializer fails, so that NIO closes its descriptor unregistered.
    func childChannelSetUp(
        takingOver takeOver: @escaping @Sendable (Channel) -> Bool,
        _ setUp: @escaping @Sendable (Channel) throws -> Void
    ) -> ServerBootstrap {
        self.childChannelInitializer { channel in
            if takeOver(channel) { return channel.eventLoop.makeFailedFuture(SplicedAway()) }
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(SetUpWhenActive(setUp))
            }
        }
    }
}

/// The accepted connection went to a splice relay: NIO's channel for it is closed unused.
struct SplicedAway: Error {}
