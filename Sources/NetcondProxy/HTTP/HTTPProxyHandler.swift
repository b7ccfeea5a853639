import NIOCore
import NIOHTTP1
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP/1.1 forward proxy on one client connection: absolute-form requests, keep-alive,
/// streamed bodies both ways (chunked or not), and `CONNECT` tunnels.
///
/// A thin shell: every decision is ``HTTPProxyStateMachine``'s; this handler feeds it what happens
/// on the two channels and its timers, and carries out the actions it returns. The server
/// connection is kept while the client keeps asking the same host:port. A server's close, a
/// refusal and a lost handshake reach the client as the network shows them (a FIN or a reset
/// crossing the link), never as an answer of netcond's own; netcond answers itself only a request
/// it cannot route (400) and a name that does not resolve (502).
final class HTTPProxyHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let shaper: LinkShaper
    private let connector: UpstreamConnector
    private var machine: HTTPProxyStateMachine
    private var context: ChannelHandlerContext?
    private var upstream: Channel?
    private var upstreamHandler: UpstreamHTTPHandler?
    /// The server connection being made (a request's or a tunnel's), until its outcome is known.
    private var pendingConnect: ConnectAttempt?
    /// The current fault's timer: releasing a held response (`delay`) or closing late (`slow_close`).
    private var faultTimer: Scheduled<Void>?
    /// Runs while the connection waits for a request head with no server connection open.
    private var idleTimer: Scheduled<Void>?

    /// A client with no request under way and no server connection behind it must send a whole
    /// request head within this time, or is let go: a slow-loris trickling a head, a connection
    /// opened and forgotten after an answer of netcond's own (the captive portal's). As servers'
    /// header time-outs (nginx's is 60 s). While a server connection is open, its own idle
    /// time-out decides instead (its close reaches the client).
    static let idleTimeout = TimeAmount.seconds(60)

    init(shaper: LinkShaper, connector: UpstreamConnector) {
        self.shaper = shaper
        self.connector = connector
        self.machine = HTTPProxyStateMachine(policy: connector.rules)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.rearmIdleTimer()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.faultTimer?.cancel()
        self.faultTimer = nil
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }

    // MARK: Client → proxy

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.perform(self.machine.requestPart(self.unwrapInboundIn(data), now: context.eventLoop.now))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.perform(self.machine.requestReadComplete())
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.perform(self.machine.clientClosed())
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? LinkWritabilityChanged {
            self.machine.linkWritabilityChanged(event.isWritable)
            if self.clientWritable { self.upstreamHandler?.resumeReading() }
            return
        }
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The client left while its connection was still being made (held up by a blackhole,
            // lost SYNs, a firewall)? A FIN sooner than the set-up could have finished is a client
            // that half-closes after its request, which it could not have sent before connecting
            // on a real network: that request goes on. A tunnel's client has nothing to
            // half-close before it has its tunnel.
            var leftBeforeConnecting = false
            if let attempt = self.pendingConnect, attempt.isUnderWay {
                leftBeforeConnecting = self.machine.state == .tunnel || context.eventLoop.now >= attempt.unimpededBy
            }
            self.perform(self.machine.clientInputClosed(leftBeforeConnecting: leftBeforeConnecting))
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let error = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        self.connector.stats.badRequests += 1
        self.perform(self.machine.malformedRequest(HTTPRequestRouting.explain(error)))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if self.clientWritable { self.upstreamHandler?.resumeReading() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if self.machine.mayRead(upstreamWritable: self.upstream?.isWritable ?? false) {
            context.read()
        }
    }

    var clientWritable: Bool {
        guard let context = self.context else { return false }
        return context.channel.isWritable && self.machine.responseMayFlow
    }

    /// The error an upstream channel reports when its peer reset the connection.
    static func isReset(_ error: Error) -> Bool {
        (error as? IOError)?.errnoCode == ECONNRESET
    }

    // MARK: From the server connection (its handler)

    func upstreamResponse(_ part: HTTPClientResponsePart) {
        guard let context = self.context else { return }
        self.perform(self.machine.responsePart(part, now: context.eventLoop.now))
    }

    func upstreamFlush() {
        if !self.machine.responseHeld { self.context?.flush() }
    }

    func upstreamClosed(error: Error?) {
        self.upstream = nil
        self.upstreamHandler = nil
        guard self.context != nil else { return }
        if let error = error as? HTTPParserError, error != .invalidEOFState {
            // Not a close of the server's: a response the decoder could not read. (The end of the
            // stream in the middle of a response is the server's close, cutting it short.)
            return self.perform(self.machine.upstreamMalformed(Self.describe(error)))
        }
        self.perform(self.machine.upstreamClosed(reset: error.map(Self.isReset) ?? false))
    }

    /// A parser error in the words of what the server sent.
    static func describe(_ error: HTTPParserError) -> String {
        switch error {
        case .invalidConstant, .invalidVersion, .invalidStatus:
            return "its first bytes are no HTTP/1.x status line (an HTTP/0.9 answer, or not HTTP)"
        case .unexpectedContentLength, .invalidContentLength, .unknown:
            return "its framing is not HTTP/1.1's (Content-Length beside Transfer-Encoding, or a bad length)"
        case .invalidChunkSize:
            return "a chunk of its body has no valid size"
        case .headerOverflow:
            return "its head is longer than netcond reads"
        case .invalidHeaderToken, .invalidCharactersUsed, .lfExpected:
            return "its head holds bytes HTTP does not allow there"
        default:
            return String(describing: error)
        }
    }

    func upstreamWritabilityChanged() {
        if self.upstream?.isWritable ?? false { self.resumeReadingIfPending() }
    }

    // MARK: Carrying out the machine's actions

    private func perform(_ actions: [HTTPProxyStateMachine.Action]) {
        for action in actions {
            guard let context = self.context else { return }
            self.perform(action, context: context)
        }
    }

    private func perform(_ action: HTTPProxyStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .forward(let part, let flush):
            if flush {
                self.upstream?.writeAndFlush(part, promise: nil)
            } else {
                self.upstream?.write(part, promise: nil)
            }
        case .flushUpstream:
            self.upstream?.flush()
        case .write(let part, let flush):
            if flush {
                context.writeAndFlush(self.wrapOutboundOut(part), promise: nil)
            } else {
                context.write(self.wrapOutboundOut(part), promise: nil)
            }
        case .flushClient:
            context.flush()
        case .connect(let target):
            self.connect(to: target)
        case .openTunnel(let target):
            self.openTunnel(to: target)
        case .closeUpstream:
            self.upstreamHandler?.detach()
            self.upstream?.close(promise: nil)
            self.upstream = nil
            self.upstreamHandler = nil
        case .abandonConnect:
            self.pendingConnect?.abandon()
        case .closeClient(let close):
            context.triggerUserOutboundEvent(close, promise: nil)
        case .closeClientNow:
            context.close(promise: nil)
        case .writeThenReset(let last):
            let channel = context.channel
            context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(last)))).whenComplete { _ in
                channel.resetConnection()
            }
        case .releaseAt(let deadline):
            self.faultTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
                self.faultTimer = nil
                guard let context = self.context else { return }
                self.perform(self.machine.releaseHeld(now: context.eventLoop.now))
            }
        case .closeLater(let delay):
            // Kept, so that a connection that goes away first cancels it.
            self.faultTimer = context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
                self.context?.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
            }
        case .rearmIdleTimer:
            self.rearmIdleTimer()
        case .cancelIdleTimer:
            self.idleTimer?.cancel()
            self.idleTimer = nil
        case .resumeReadingIfPending:
            self.resumeReadingIfPending()
        case .resumeUpstreamReading:
            if self.clientWritable { self.upstreamHandler?.resumeReading() }
        case .switchToTunnel:
            self.switchToTunnel(context: context)
        case .noteAlteredHeader(let name, let host):
            self.connector.rules?.noteAlteredHeader(name, host: host, at: context.eventLoop.now)
        case .noteMalformed(let reason, let host):
            self.connector.rules?.noteMalformed(reason, host: host, at: context.eventLoop.now)
        }
    }

    /// (Re)starts the idle time-out when the connection waits for a head with no server behind it.
    private func rearmIdleTimer() {
        self.idleTimer?.cancel()
        self.idleTimer = nil
        guard self.machine.waitsIdle, let context = self.context else { return }
        self.idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.idleTimeout) {
            self.idleTimer = nil
            self.perform(self.machine.idleTimedOut())
        }
    }

    private func resumeReadingIfPending() {
        guard let context = self.context, self.machine.takePendingRead() else { return }
        self.read(context: context)
    }

    // MARK: Server connections

    private func connect(to target: UpstreamTarget) {
        self.pendingConnect = self.connector.connect(to: target, flow: self.shaper.flow) { [weak self] result in
            self?.pendingConnect = nil
            self?.connected(result, target: target)
        }
    }

    private func connected(_ result: Result<Channel, UpstreamError>, target: UpstreamTarget) {
        guard self.machine.state == .connecting, let context = self.context else {
            if case .success(let channel) = result { channel.close(promise: nil) }
            return
        }
        switch result {
        case .failure(let error):
            self.perform(self.machine.connectFailed(error))
        case .success(let channel):
            let handler = UpstreamHTTPHandler(owner: self)
            do {
                // Interim responses (100 Continue) are passed on: a client that sent `Expect:
                // 100-continue` waits for one before it sends its body.
                try channel.pipeline.syncOperations.addHandlers([
                    HTTPRequestEncoder(),
                    // Bytes a server sends right behind a 101 belong to the new protocol: kept.
                    ByteToMessageHandler(
                        HTTPResponseDecoder(
                            leftOverBytesStrategy: .forwardBytes, informationalResponseStrategy: .forward)),
                ])
                try channel.pipeline.syncOperations.addHandler(handler)
            } catch {
                channel.close(promise: nil)
                return self.perform(self.machine.upstreamSetupFailed("\(error)"))
            }
            self.upstream = channel
            self.upstreamHandler = handler
            channel.setOption(.autoRead, value: true).whenFailure { _ in channel.close(promise: nil) }
            self.perform(self.machine.upstreamConnected(target, now: context.eventLoop.now))
        }
    }

    /// After a `101 Switching Protocols`: the HTTP handlers leave both pipelines and a glue pair
    /// joins them; bytes either decoder still holds (sent right behind the request or the 101)
    /// go on through the glue.
    private func switchToTunnel(context: ChannelHandlerContext) {
        guard let upstream = self.upstream, let upstreamHandler = self.upstreamHandler else {
            return context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
        }
        self.upstream = nil
        self.upstreamHandler = nil
        let (clientGlue, upstreamGlue) = GlueHandler.matchedPair()
        do {
            let client = context.pipeline.syncOperations
            let server = upstream.pipeline.syncOperations
            try client.addHandler(clientGlue)
            try server.addHandler(upstreamGlue)
            server.removeHandler(upstreamHandler, promise: nil)
            server.removeHandler(try server.handler(type: HTTPRequestEncoder.self), promise: nil)
            server.removeHandler(try server.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self), promise: nil)
            client.removeHandler(try client.handler(type: HTTPResponseEncoder.self), promise: nil)
            let decoder = try client.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            client.removeHandler(context: context, promise: nil)
            client.removeHandler(decoder).assumeIsolated().whenComplete { _ in upstream.flush() }
            upstream.read()
            context.channel.read()
        } catch {
            upstream.close(promise: nil)
            context.close(promise: nil)
        }
    }

    // MARK: CONNECT

    private func openTunnel(to target: UpstreamTarget) {
        let flow = self.shaper.prepareFlow()
        self.pendingConnect = self.connector.connect(to: target, flow: flow) { [weak self] result in
            self?.pendingConnect = nil
            guard let self, let context = self.context, self.machine.state == .tunnel else {
                if case .success(let channel) = result { channel.close(promise: nil) }
                return
            }
            switch result {
            case .failure(let error):
                self.perform(self.machine.connectFailed(error))
            case .success(let upstream):
                self.establishTunnel(upstream, context: context)
            }
        }
    }

    private func establishTunnel(_ upstream: Channel, context: ChannelHandlerContext) {
        let (clientGlue, upstreamGlue) = GlueHandler.matchedPair()
        do {
            try upstream.pipeline.syncOperations.addHandler(upstreamGlue)
            let pipeline = context.pipeline.syncOperations
            // Take the HTTP encoder out first: a 200 to CONNECT has no body, and it goes out raw.
            pipeline.removeHandler(try pipeline.handler(type: HTTPResponseEncoder.self), promise: nil)
            let established = context.channel.allocator.buffer(string: "HTTP/1.1 200 Connection Established\r\n\r\n")
            context.writeAndFlush(NIOAny(established), promise: nil)
            self.shaper.upstreamBytesFollow()
            // Everything after the 200 is tunnel traffic and crosses the emulated link.
            self.shaper.beginShaping()
            try pipeline.addHandler(clientGlue)
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            pipeline.removeHandler(context: context, promise: nil)
            // The decoder hands bytes it has buffered past the CONNECT head on to the glue (a
            // client that sent its ClientHello with the CONNECT); the glue writes them upstream
            // and would flush them at the read's end, which has passed: they are flushed here.
            pipeline.removeHandler(decoder).assumeIsolated().whenComplete { _ in upstream.flush() }
            upstream.setOption(.autoRead, value: true).whenFailure { _ in upstream.close(promise: nil) }
            context.channel.read()
        } catch {
            upstream.close(promise: nil)
            context.close(promise: nil)
        }
    }
}
