import NIOCore
import NIOHTTP1
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// One connection's HTTP/1.1 server logic, behind NIO's HTTP server pipeline (which serialises pipelined requests).
///
/// Each request is logged when its head arrives, its body is read and discarded, and on its end the router turns it
/// into an ``OriginResponse``, which this handler sends: after the response's delay (a timer on the channel's event
/// loop, cancelled if the client goes away), and with a generated body produced chunk by chunk only while the channel
/// is writable — a 4 GB body never exists in memory, and a slow reader slows the generator, not the other way round.
///
/// ```
/// idle ──head──▶ receivingBody ──end──▶ (delaying ──timer──▶) streaming ──last chunk──▶ end written ──▶ idle
///                                                                  ▲ writable again │ not writable
///                                                                  └────────────────┘
/// ```
final class OriginHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// A request being answered.
    private struct Exchange {
        var logID: Int
        var request: OriginRequest
        var version: HTTPVersion
        /// Whether the connection stays open after this response.
        var keepAlive: Bool
    }

    /// Progress through a generated body.
    private struct BodyCursor {
        var source: DeterministicBytes
        var next: Int64
        var end: Int64
        /// The response is cut at `end`: the connection ends (so) instead of the response.
        var cutEnd: FaultAction.CutEnd?
        /// A `slow_close` fault: the connection closes this long after the whole response.
        var slowClose: Span?
        /// The last chunk's write, which a cut waits for before closing.
        var lastWrite: EventLoopFuture<Void>?
    }

    private enum State {
        case idle
        case receivingBody(Exchange)
        case delaying(Exchange, OriginResponse, Scheduled<Void>)
        /// Never answering (a scenario's `hang` fault).
        case hanging(Exchange)
        case streaming(Exchange, BodyCursor)
        /// The last response of a `Connection: close` exchange is going out; further requests are ignored.
        case closing
        case closed
    }

    private let router: OriginRouter
    private let log: OriginRequestLog
    private let clock: OriginClock
    private let connectionID: Int
    private let chunkSize: Int
    /// 443 on the TLS listener, else 80: the port a request that names none went to.
    private let listenerPort: Int
    /// Chunks written per event-loop turn before yielding to other connections on the same loop.
    private let chunksPerTurn: Int
    private var state = State.idle
    /// Closes a connection that stays idle between requests (or before its first) this long, as a
    /// real server's keep-alive time-out does (nginx's is 75 s, Apache's 5 s).
    static let keepAliveTimeout = TimeAmount.seconds(60)
    private var idleTimer: Scheduled<Void>?
    private var isPumping = false
    private var inputClosed = false

    init(
        router: OriginRouter,
        log: OriginRequestLog,
        clock: OriginClock,
        connectionID: Int,
        chunkSize: Int,
        listenerPort: Int = 80,
        chunksPerTurn: Int = 16
    ) {
        self.listenerPort = listenerPort
        precondition(chunkSize > 0 && chunksPerTurn > 0, "chunk size and chunks per turn must be positive")
        self.router = router
        self.log = log
        self.clock = clock
        self.connectionID = connectionID
        self.chunkSize = chunkSize
        self.chunksPerTurn = chunksPerTurn
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.startIdleTimer(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.startIdleTimer(context: context)
        context.fireChannelActive()
    }

    /// Starts the keep-alive time-out; a request's head stops it.
    private func startIdleTimer(context: ChannelHandlerContext) {
        self.idleTimer?.cancel()
        let loop = context.eventLoop.assumeIsolated()
        self.idleTimer = loop.scheduleTask(in: Self.keepAliveTimeout) { [weak self] in
            guard let self, case .idle = self.state else { return }
            self.state = .closed
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            guard case .idle = self.state else {
                // The HTTP pipeline handler delivers one request at a time, so this only happens while closing.
                return
            }
            self.idleTimer?.cancel()
            self.idleTimer = nil
            let request = OriginRequest(
                method: head.method, target: head.uri, headers: head.headers, listenerPort: self.listenerPort)
            let id = self.log.begin(
                connection: self.connectionID,
                timestamp: self.clock.now(),
                method: head.method.rawValue,
                target: head.uri,
                host: request.host,
                headers: OriginRequestLog.Headers(head.headers)
            )
            self.state = .receivingBody(
                Exchange(logID: id, request: request, version: head.version, keepAlive: head.isKeepAlive))
            if (head.version.major, head.version.minor) >= (1, 1),
                head.headers[canonicalForm: "expect"].contains(where: { $0.lowercased() == "100-continue" })
            {
                // The body is wanted (and discarded): don't make the client wait for its 100-continue timeout.
                let interim = HTTPResponseHead(version: head.version, status: .continue)
                context.writeAndFlush(self.wrapOutboundOut(.head(interim)), promise: nil)
            }
        case .body:
            // Request bodies are read and discarded: a POST's side effect is counted, not stored.
            break
        case .end:
            guard case .receivingBody(let exchange) = self.state else { return }
            let response = self.router.response(for: exchange.request)
            if let effect = response.effect { self.log.recordEffect(effect, id: exchange.logID) }
            if let fault = response.fault { self.log.recordFault(fault, id: exchange.logID) }
            if response.dropResponse {
                // The work is done; the answer is lost: close without a byte.
                self.log.finish(id: exchange.logID, completed: false, at: self.clock.now())
                self.state = .closed
                context.close(promise: nil)
            } else if response.hang {
                self.state = .hanging(exchange)
            } else if let delay = response.delay, delay > .zero {
                let scheduled = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
                    self.delayElapsed(context: context)
                }
                self.state = .delaying(exchange, response, scheduled)
            } else {
                self.send(response, for: exchange, context: context)
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, case .streaming = self.state {
            self.pump(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let channelEvent = event as? ChannelEvent, channelEvent == .inputClosed {
            // The client half-closed: answer what is in flight, then close.
            self.inputClosed = true
            switch self.state {
            case .idle, .receivingBody:
                context.close(promise: nil)
            case .delaying, .streaming, .hanging, .closing, .closed:
                break
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let now = self.clock.now()
        switch self.state {
        case .receivingBody(let exchange), .streaming(let exchange, _), .hanging(let exchange):
            self.log.finish(id: exchange.logID, completed: false, at: now)
        case .delaying(let exchange, _, let scheduled):
            scheduled.cancel()
            self.log.finish(id: exchange.logID, completed: false, at: now)
        case .idle, .closing, .closed:
            break
        }
        self.idleTimer?.cancel()
        self.idleTimer = nil
        self.state = .closed
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Malformed requests were already answered with 400 by NIO's protocol error handler; I/O errors end the
        // connection. Either way nothing is left to do but close.
        context.close(promise: nil)
    }

    // MARK: - Sending

    private func delayElapsed(context: ChannelHandlerContext) {
        guard case .delaying(let exchange, let response, _) = self.state else { return }
        self.send(response, for: exchange, context: context)
    }

    private func send(_ response: OriginResponse, for exchange: Exchange, context: ChannelHandlerContext) {
        var exchange = exchange
        exchange.keepAlive = exchange.keepAlive && !self.inputClosed && response.slowClose == nil
        var headers = response.headers
        if !exchange.keepAlive {
            headers.replaceOrAdd(name: "Connection", value: "close")
        } else if exchange.version.major == 1 && exchange.version.minor == 0 {
            headers.replaceOrAdd(name: "Connection", value: "keep-alive")
        }
        let head = HTTPResponseHead(version: exchange.version, status: response.status, headers: headers)
        self.log.recordStatus(
            Int(response.status.code), retryAfter: response.headers.first(name: "retry-after"), id: exchange.logID,
            at: self.clock.now())

        switch response.body {
        case .none:
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            self.finishResponse(exchange, closingAfter: response.slowClose, context: context)
        case .buffer(var buffer):
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            let cut = response.cut.flatMap { $0.after < buffer.readableBytes ? $0 : nil }
            if let cut { buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(max(0, cut.after)))! }
            let promise = self.countingPromise(bytes: buffer.readableBytes, exchange: exchange, context: context)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: promise)
            if let cut {
                return self.cut(exchange, after: promise.futureResult, end: cut.end, context: context)
            }
            self.finishResponse(exchange, closingAfter: response.slowClose, context: context)
        case .generated(let source, let range):
            var cursor = BodyCursor(source: source, next: range.lowerBound, end: range.upperBound)
            cursor.slowClose = response.slowClose
            if let cut = response.cut, cut.after < range.count {
                cursor.end = range.lowerBound + max(0, cut.after)
                cursor.cutEnd = cut.end
            }
            self.state = .streaming(exchange, cursor)
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            self.pump(context: context)
        }
    }

    /// Writes generated chunks while the channel is writable; resumes from `channelWritabilityChanged`.
    private func pump(context: ChannelHandlerContext) {
        // Flushing can make the channel writable again and re-enter through channelWritabilityChanged; the loop below
        // already continues in that case, so a nested call must not recurse (a 1 GB body would overflow the stack).
        guard !self.isPumping else { return }
        self.isPumping = true
        defer { self.isPumping = false }

        var chunksThisTurn = 0
        while case .streaming(let exchange, var cursor) = self.state {
            if cursor.next >= cursor.end {
                if let end = cursor.cutEnd {
                    self.cut(exchange, after: cursor.lastWrite, end: end, context: context)
                } else {
                    self.finishResponse(exchange, closingAfter: cursor.slowClose, context: context)
                }
                return
            }
            if !context.channel.isWritable {
                context.flush()
                if context.channel.isWritable {
                    continue
                }
                return
            }
            if chunksThisTurn >= self.chunksPerTurn {
                // Yield so other connections on this event loop get a turn; carry on in the next one.
                context.flush()
                context.eventLoop.assumeIsolated().execute {
                    self.pump(context: context)
                }
                return
            }
            let count = Int(min(Int64(self.chunkSize), cursor.end - cursor.next))
            var buffer = context.channel.allocator.buffer(capacity: count)
            cursor.source.fill(into: &buffer, offset: cursor.next, count: count)
            cursor.next += Int64(count)
            chunksThisTurn += 1
            let promise = self.countingPromise(bytes: count, exchange: exchange, context: context)
            cursor.lastWrite = promise.futureResult
            self.state = .streaming(exchange, cursor)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: promise)
        }
    }

    /// Ends a cut response: once its last chunk is in the socket, the connection closes without the rest, with a
    /// FIN or a reset.
    private func cut(
        _ exchange: Exchange, after lastWrite: EventLoopFuture<Void>?, end: FaultAction.CutEnd,
        context: ChannelHandlerContext
    ) {
        self.state = .closing
        context.flush()
        let log = self.log
        let clock = self.clock
        let id = exchange.logID
        let close = {
            log.finish(id: id, completed: false, at: clock.now())
            if end == .reset, let options = context.channel as? SocketOptionProvider {
                // SO_LINGER 0: the close sends a reset, not a FIN.
                options.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
                    context.close(promise: nil)
                }
            } else {
                context.close(promise: nil)
            }
        }
        if let lastWrite {
            lastWrite.assumeIsolated().whenComplete { _ in close() }
        } else {
            close()
        }
    }

    /// A write promise that adds `bytes` to the log entry once the bytes are written to the socket.
    private func countingPromise(bytes: Int, exchange: Exchange, context: ChannelHandlerContext)
        -> EventLoopPromise<Void>
    {
        let promise = context.eventLoop.makePromise(of: Void.self)
        let log = self.log
        let id = exchange.logID
        promise.futureResult.whenSuccess {
            log.addBodyBytes(bytes, id: id)
        }
        return promise
    }

    /// Writes the end of the response; closes the connection afterwards unless it is kept alive (`closingAfter`:
    /// that much later, a `slow_close` fault).
    private func finishResponse(_ exchange: Exchange, closingAfter slowClose: Span?, context: ChannelHandlerContext) {
        // Set the state before writing: writing the end lets the pipeline handler deliver the next request at once.
        let keepAlive = exchange.keepAlive && !self.inputClosed
        self.state = keepAlive ? .idle : .closing
        if keepAlive { self.startIdleTimer(context: context) }
        let promise = context.eventLoop.makePromise(of: Void.self)
        let log = self.log
        let clock = self.clock
        let id = exchange.logID
        promise.futureResult.assumeIsolated().whenComplete { result in
            switch result {
            case .success:
                log.finish(id: id, completed: true, at: clock.now())
            case .failure:
                log.finish(id: id, completed: false, at: clock.now())
            }
            if let slowClose, !keepAlive {
                context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(slowClose.nanoseconds)) {
                    context.close(promise: nil)
                }
            } else if !keepAlive {
                context.close(promise: nil)
            }
        }
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: promise)
    }
}
