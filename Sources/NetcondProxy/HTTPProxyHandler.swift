import DequeModule
import NIOCore
import NIOHTTP1
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP/1.1 forward proxy on one client connection: absolute-form requests, keep-alive,
/// streamed bodies both ways (chunked or not), and `CONNECT` tunnels.
///
/// Requests are handled one at a time; parts of a pipelined next request wait until the current
/// response has ended. The upstream connection is kept while the client keeps asking the same
/// host:port. A server's close, a refusal and a lost handshake reach the client as the network
/// shows them (a FIN or a reset crossing the link), never as an answer of netcond's own; netcond
/// answers itself only a request it cannot route (400) and a name that does not resolve (502).
final class HTTPProxyHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State: Equatable {
        /// Waiting for a request head.
        case idle
        /// A head arrived; connecting upstream. Later parts wait in `queued`.
        case connecting
        /// Request parts go straight upstream.
        case forwarding
        /// netcond answers this request itself (a fault's status, the captive portal, a probe):
        /// its parts are read and dropped until its end.
        case answering(CannedResponse)
        /// The client asked for a tunnel; the HTTP handlers are about to be removed.
        case tunnel
        case closed
    }

    private let shaper: LinkShaper
    private let connector: UpstreamConnector
    private var context: ChannelHandlerContext?
    private var state = State.idle
    private var queued = Deque<HTTPServerRequestPart>()
    private var upstream: Channel?
    private var upstreamHandler: UpstreamHTTPHandler?
    private var upstreamTarget: UpstreamTarget?
    /// The upstream connection being made (a request's or a tunnel's), until its outcome is known.
    private var pendingConnect: ConnectAttempt?
    private var requestKeepAlive = true
    /// The client sent FIN: the requests it sent before are answered, then the connection closes.
    private var clientInputClosed = false
    private var requestEnded = false
    private var responseEnded = false
    private var responseStarted = false
    private var responseStatus: HTTPResponseStatus?
    private var pendingRead = false
    private var linkWritable = true
    /// The fault applied to the current exchange's response, if any.
    private var fault: HTTPFaultAction?
    /// `first_byte`: response parts wait here until this moment.
    private var responseNotBefore: NIODeadline?
    private var heldResponse: [HTTPClientResponsePart] = []
    /// The current fault's timer: releasing a held response (`first_byte`) or closing late (`slow_close`).
    private var releaseTimer: Scheduled<Void>?
    private var responseBodyBytes = 0
    private var requestIsHead = false
    /// The upstream closed while a `first_byte` fault held the response: `.some(error or nil)`.
    private var upstreamClosedWhileHeld: (any Error)?? = nil
    /// Runs while the connection waits for a request head with no upstream connection open.
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
    }

    private var stats: ProxyStats { self.connector.stats }
    private var rules: ProxyRules? { self.connector.rules }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.armIdleTimer(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.releaseTimer?.cancel()
        self.releaseTimer = nil
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }

    /// (Re)starts the idle time-out when the connection waits for a head with no server behind it.
    private func armIdleTimer(context: ChannelHandlerContext) {
        self.idleTimer?.cancel()
        self.idleTimer = nil
        guard self.state == .idle, self.upstream == nil else { return }
        self.idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.idleTimeout) {
            guard self.state == .idle, self.upstream == nil, let context = self.context else { return }
            self.state = .closed
            context.close(promise: nil)
        }
    }

    // MARK: Client → proxy

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = self.unwrapInboundIn(data)
        switch self.state {
        case .idle:
            if case .head(let head) = part {
                self.idleTimer?.cancel()
                self.idleTimer = nil
                self.start(head, context: context)
            }
        case .connecting:
            self.queued.append(part)
        case .forwarding:
            if !self.requestEnded {
                self.forward(part)
            } else {
                self.queued.append(part)
            }
        case .answering(let response):
            if case .end = part { self.answer(response, context: context) }
        case .tunnel, .closed:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.state == .forwarding { self.upstream?.flush() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.state = .closed
        self.pendingConnect?.abandon()
        self.upstream?.close(promise: nil)
        self.upstream = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? LinkWritabilityChanged {
            self.linkWritable = event.isWritable
            if self.clientWritable { self.upstreamHandler?.resumeReading() }
            return
        }
        if let event = event as? ChannelEvent, event == .inputClosed {
            if let attempt = self.pendingConnect, attempt.isUnderWay,
                self.state == .tunnel || context.eventLoop.now >= attempt.unimpededBy
            {
                // The client left while its connection was still being made (held up by a
                // blackhole, lost SYNs, a firewall): on a real network its request was never
                // sent, so it never reaches the server now either. (A FIN sooner than the set-up
                // could have finished is a client that half-closes after its request, which it
                // could not have sent before connecting on a real network: that request goes on.
                // A tunnel's client has nothing to half-close before it has its tunnel.)
                self.state = .closed
                attempt.abandon()
                context.close(promise: nil)
                return
            }
            // The client will send nothing more; once every request it sent is answered, close.
            self.clientInputClosed = true
            if self.state == .idle {
                context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let error = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        // A malformed request: nothing after it can be trusted. One 400 saying so, unless a
        // response is already on its way (then that one is cut short), and the connection ends.
        self.stats.badRequests += 1
        guard self.state != .closed else { return }
        self.pendingConnect?.abandon()
        self.upstream?.close(promise: nil)
        if self.responseStarted && !self.responseEnded {
            self.state = .closed
            context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
        } else {
            self.fail(400, "malformed request: \(Self.explain(error)); send an HTTP/1.1 request with an absolute URL or CONNECT host:port", context: context)
        }
    }

    /// What was wrong with a request, in words (not the parser's case names).
    static func explain(_ error: HTTPParserError) -> String {
        switch error {
        case .invalidVersion: return "the version is not HTTP/1.0 or HTTP/1.1"
        case .invalidMethod: return "the method is not a valid token"
        case .invalidURL, .invalidHost, .invalidPort, .invalidPath, .invalidQueryString, .invalidFragment:
            return "the request target is not a valid URL"
        case .invalidHeaderToken, .invalidCharactersUsed, .invalidConstant:
            return "a character not allowed there (in the request line, a header name or a header value)"
        case .lfExpected, .strictModeAssertion: return "a line does not end with CRLF"
        case .headerOverflow: return "the request head is larger than 80 KB"
        case .invalidContentLength, .unexpectedContentLength: return "the Content-Length is not a valid length"
        case .invalidChunkSize: return "a chunk size of the chunked body is not valid hexadecimal"
        default: return "the request cannot be read as HTTP/1.x"
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if self.clientWritable { self.upstreamHandler?.resumeReading() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        let canRead: Bool
        switch self.state {
        case .idle, .answering: canRead = true
        case .connecting, .tunnel: canRead = false
        case .forwarding: canRead = !self.requestEnded && (self.upstream?.isWritable ?? false)
        case .closed: canRead = true
        }
        if canRead {
            context.read()
        } else {
            self.pendingRead = true
        }
    }

    private func resumeReadingIfPossible() {
        guard self.pendingRead, let context = self.context else { return }
        self.pendingRead = false
        self.read(context: context)
    }

    var clientWritable: Bool {
        guard let context = self.context else { return false }
        return context.channel.isWritable && self.linkWritable && self.responseNotBefore == nil
    }

    // MARK: Starting a request

    private func start(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        self.requestEnded = false
        self.responseEnded = false
        self.responseStarted = false
        self.responseStatus = nil
        self.fault = nil
        self.responseNotBefore = nil
        self.responseBodyBytes = 0
        self.requestKeepAlive = head.isKeepAlive
        if let problem = Self.framingProblem(head) {
            return self.fail(400, problem, context: context)
        }
        if head.method == .CONNECT {
            guard let target = UpstreamTarget(authority: head.uri, defaultPort: nil) else {
                return self.fail(400, "CONNECT needs host:port, got '\(head.uri)'", context: context)
            }
            self.state = .tunnel
            self.openTunnel(to: target, context: context)
            return
        }
        let target: UpstreamTarget
        let path: String
        switch self.route(head) {
        case .success(let routed): (target, path) = routed
        case .failure(let problem): return self.fail(400, problem.message, context: context)
        }
        self.requestIsHead = head.method == .HEAD
        let now = context.eventLoop.now
        if let answer = self.rules?.captiveAnswer(method: head.method.rawValue, host: target.host, path: path, now: now) {
            self.state = .answering(answer)
            return
        }
        let request = FaultRequest(method: head.method.rawValue, host: target.host, path: path)
        self.fault = self.rules?.decide(request, now: now)
        switch self.fault {
        case .status(let status, let retryAfter)?:
            let code = HTTPResponseStatus(statusCode: status)
            self.state = .answering(
                CannedResponse(
                    status: status,
                    headers: retryAfter.map { [("Retry-After", $0.headerValue)] } ?? [],
                    body: Array("netcond fault: \(status) \(code.reasonPhrase)\n".utf8),
                    contentType: "text/plain; charset=utf-8"
                )
            )
            return
        case .firstByte(let delay)?:
            self.responseNotBefore = now + .nanoseconds(delay.nanoseconds)
        default:
            break
        }
        var upstreamHead = head
        upstreamHead.uri = path
        upstreamHead.headers.remove(name: "Proxy-Connection")
        upstreamHead.headers.remove(name: "Proxy-Authorization")
        if !upstreamHead.headers.contains(name: "Host") {
            upstreamHead.headers.add(name: "Host", value: Self.hostHeader(target))
        }
        if let upstream = self.upstream, upstream.isActive, self.upstreamTarget == target {
            self.state = .forwarding
            self.forward(.head(upstreamHead))
            return
        }
        self.upstream?.close(promise: nil)
        self.upstream = nil
        self.upstreamHandler = nil
        self.state = .connecting
        self.queued.prepend(.head(upstreamHead))
        let flow = self.shaper.flow
        self.pendingConnect = self.connector.connect(to: target, flow: flow) { [weak self] result in
            self?.pendingConnect = nil
            self?.connected(result, target: target)
        }
    }

    /// Why a request cannot be routed, in words for its sender.
    struct RouteProblem: Error {
        var message: String
    }

    /// Target and origin-form path of a request, or why it cannot be routed.
    private func route(_ head: HTTPRequestHead) -> Result<(UpstreamTarget, String), RouteProblem> {
        let uri = head.uri
        if uri.lowercased().hasPrefix("http://") {
            let rest = uri.dropFirst("http://".count)
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            let authorityWithoutUser = authority.split(separator: "@").last.map(String.init) ?? ""
            guard let target = UpstreamTarget(authority: authorityWithoutUser, defaultPort: 80) else {
                return .failure(RouteProblem(message:
                    "bad host or port '\(authorityWithoutUser)' in '\(uri)'; allowed: a name or address, "
                        + "an IPv6 address in brackets, and a port from 1 to 65535 in digits"))
            }
            var path = String(rest[authorityEnd...])
            if path.hasPrefix("#") { path = "" }
            if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
            if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
            return .success((target, path))
        }
        if uri.hasPrefix("/"), let host = head.headers.first(name: "Host"),
            let target = UpstreamTarget(authority: host, defaultPort: 80)
        {
            return .success((target, uri))
        }
        return .failure(RouteProblem(message:
            "netcond is a forward proxy: send an absolute URL (GET http://host/path) or CONNECT host:port; got '\(uri)'"))
    }

    /// Why a request's framing cannot be trusted (nil when it can): a request a server could read
    /// differently from the proxy would let a second request pass the proxy unseen.
    static func framingProblem(_ head: HTTPRequestHead) -> String? {
        if head.headers[canonicalForm: "Host"].count > 1 {
            return "more than one Host header; send exactly one"
        }
        if head.version.major != 1 || head.version.minor > 1 {
            return "HTTP/\(head.version.major).\(head.version.minor) is not spoken here; send HTTP/1.1"
        }
        // The parser hands over text: bytes that are not UTF-8 come out as U+FFFD, and would reach
        // the server changed. Refused rather than passed on altered.
        let replacement: Character = "\u{FFFD}"
        if let (name, _) = head.headers.first(where: { $0.name.contains(replacement) || $0.value.contains(replacement) }) {
            return "the header '\(name.replacingOccurrences(of: "\u{FFFD}", with: "?"))' holds bytes that are not UTF-8, "
                + "which netcond cannot pass on unchanged; send them percent-encoded (or as RFC 8187 ext-value)"
        }
        if head.uri.contains(replacement) {
            return "the request target holds bytes that are not UTF-8, which netcond cannot pass on unchanged; send them percent-encoded"
        }
        guard head.headers.contains(name: "Transfer-Encoding") else { return nil }
        if head.version.minor == 0 {
            return "an HTTP/1.0 request with Transfer-Encoding has no trustworthy length (RFC 9112 §6.1); "
                + "send HTTP/1.1, or HTTP/1.0 with Content-Length"
        }
        if head.headers.contains(name: "Content-Length") {
            return "both Transfer-Encoding and Content-Length (RFC 9112 §6.3); send one of them"
        }
        return nil
    }

    private static func hostHeader(_ target: UpstreamTarget) -> String {
        target.port == 80 ? target.host : target.description
    }

    private func connected(_ result: Result<Channel, UpstreamError>, target: UpstreamTarget) {
        guard self.state == .connecting, let context = self.context else {
            if case .success(let channel) = result { channel.close(promise: nil) }
            return
        }
        switch result {
        case .failure(let error):
            self.queued.removeAll()
            self.failConnect(error, context: context)
        case .success(let channel):
            let handler = UpstreamHTTPHandler(owner: self)
            do {
                // Interim responses (100 Continue) are passed on: a client that sent `Expect:
                // 100-continue` waits for one before it sends its body.
                try channel.pipeline.syncOperations.addHandlers([
                    HTTPRequestEncoder(),
                    // Bytes a server sends right behind a 101 belong to the new protocol: kept.
                    ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes, informationalResponseStrategy: .forward)),
                ])
                try channel.pipeline.syncOperations.addHandler(handler)
            } catch {
                channel.close(promise: nil)
                return self.fail(502, "cannot set up the upstream connection: \(error)", context: context)
            }
            self.upstream = channel
            self.upstreamHandler = handler
            self.upstreamTarget = target
            self.state = .forwarding
            channel.setOption(.autoRead, value: true).whenFailure { _ in channel.close(promise: nil) }
            self.drainQueue()
            channel.flush()
            self.resumeReadingIfPossible()
        }
    }

    private func drainQueue() {
        while self.state == .forwarding, !self.requestEnded, let part = self.queued.popFirst() {
            self.forward(part)
        }
    }

    private func forward(_ part: HTTPServerRequestPart) {
        guard let upstream = self.upstream else { return }
        switch part {
        case .head(let head):
            upstream.write(HTTPClientRequestPart.head(head), promise: nil)
        case .body(let buffer):
            upstream.write(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
        case .end(let trailers):
            upstream.writeAndFlush(HTTPClientRequestPart.end(trailers), promise: nil)
            self.requestEnded = true
            self.finishIfDone()
        }
    }

    // MARK: Upstream → client

    func upstreamResponse(_ part: HTTPClientResponsePart) {
        guard let context = self.context, self.state == .forwarding else { return }
        if case .head(let head) = part, (100..<200).contains(head.status.code), head.status != .switchingProtocols {
            // Not the response yet: it goes straight on (faults and holds apply to the response).
            context.writeAndFlush(self.wrapOutboundOut(.head(head)), promise: nil)
            return
        }
        if let notBefore = self.responseNotBefore {
            // `first_byte`: the response waits (and the upstream is not read meanwhile).
            self.heldResponse.append(part)
            if self.releaseTimer == nil {
                self.releaseTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: notBefore) {
                    self.releaseHeldResponse()
                }
            }
            return
        }
        switch part {
        case .head(var head):
            if self.fault == .dropResponse {
                // Processed upstream, never answered: the client sees the connection close.
                self.state = .closed
                self.upstream?.close(promise: nil)
                context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
                return
            }
            if case .slowClose = self.fault {
                head.headers.replaceOrAdd(name: "Connection", value: "close")
            }
            if let altered = head.headers.first(where: { $0.name.contains("\u{FFFD}") || $0.value.contains("\u{FFFD}") }) {
                self.rules?.noteAlteredHeader(altered.name, host: self.upstreamTarget?.host ?? "", at: context.eventLoop.now)
            }
            self.responseStarted = true
            self.responseStatus = head.status
            if !head.isKeepAlive { self.requestKeepAlive = false }
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        case .body(var buffer):
            switch self.fault {
            case .truncateAfter(let limit)?, .resetAfter(let limit)?:
                let room = max(0, Int(limit.bytes) - self.responseBodyBytes)
                if buffer.readableBytes >= room {
                    return self.cut(after: buffer.readSlice(length: room)!, reset: self.fault != .truncateAfter(limit), context: context)
                }
            default:
                break
            }
            self.responseBodyBytes += buffer.readableBytes
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        case .end(let trailers):
            context.writeAndFlush(self.wrapOutboundOut(.end(trailers)), promise: nil)
            self.responseEnded = true
            if self.responseStatus == .switchingProtocols {
                // The server switched protocols (a WebSocket): what follows is no longer HTTP,
                // so both connections become one byte pipe, as a CONNECT tunnel.
                return self.switchToTunnel(context: context)
            }
            self.finishIfDone()
        }
    }

    /// `first_byte`: the wait is over; what was held goes out in order, then the upstream is read again.
    private func releaseHeldResponse() {
        self.releaseTimer = nil
        self.responseNotBefore = nil
        let held = self.heldResponse
        self.heldResponse = []
        for part in held { self.upstreamResponse(part) }
        self.context?.flush()
        if let error = self.upstreamClosedWhileHeld {
            self.upstreamClosedWhileHeld = nil
            self.upstreamClosed(error: error)
        }
        if self.clientWritable { self.upstreamHandler?.resumeReading() }
    }

    /// `truncate_after` / `reset_after`: the last bytes the client gets, then a FIN or a reset.
    private func cut(after last: ByteBuffer, reset: Bool, context: ChannelHandlerContext) {
        self.state = .closed
        self.upstream?.close(promise: nil)
        self.upstream = nil
        self.upstreamHandler = nil
        self.responseBodyBytes += last.readableBytes
        let written = context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(last))))
        if reset {
            let channel = context.channel
            written.whenComplete { _ in channel.resetConnection() }
        } else {
            context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
        }
    }

    func upstreamFlush() {
        if self.responseNotBefore == nil { self.context?.flush() }
    }

    func upstreamClosed(error: Error?) {
        self.upstream = nil
        self.upstreamHandler = nil
        guard let context = self.context else { return }
        if self.state == .idle && self.queued.isEmpty {
            // The server closed a keep-alive connection between requests (its idle time-out):
            // the client sees its connection close, as it would without netcond, instead of a
            // connection that silently reconnects for its next request. A client that reuses a
            // connection the server has just closed must cope with that, and is judged on it.
            self.state = .closed
            let reset = error.map(Self.isReset) ?? false
            context.triggerUserOutboundEvent(CloseWhenDrained(reset: reset, crossesLink: true), promise: nil)
            return
        }
        guard self.state == .forwarding else { return }
        if self.responseNotBefore != nil {
            // Held parts first; the close is looked at again once they have gone out.
            self.upstreamClosedWhileHeld = .some(error)
            return
        }
        if self.responseEnded { return }
        // No response, or one cut short: the client sees what the server did, a FIN or a reset,
        // when it would have crossed the link; never an answer of netcond's own (a 502 here would
        // be retried by clients that would not retry a lost response, and taken as a result by
        // others).
        self.state = .closed
        let reset = error.map(Self.isReset) ?? false
        context.triggerUserOutboundEvent(CloseWhenDrained(reset: reset, crossesLink: true), promise: nil)
    }

    /// The error an upstream channel reports when its peer reset the connection.
    static func isReset(_ error: Error) -> Bool {
        (error as? IOError)?.errnoCode == ECONNRESET
    }

    func upstreamWritabilityChanged() {
        if self.upstream?.isWritable ?? false { self.resumeReadingIfPossible() }
    }

    private func finishIfDone() {
        guard self.requestEnded && self.responseEnded, let context = self.context else { return }
        let nextRequestQueued = self.queued.contains { if case .head = $0 { true } else { false } }
        if !self.requestKeepAlive || (self.clientInputClosed && !nextRequestQueued) {
            self.state = .closed
            self.upstream?.close(promise: nil)
            if case .slowClose(let delay) = self.fault {
                // The response is complete; the connection lingers before it closes.
                // Kept, so that a connection that goes away first cancels it.
                self.releaseTimer = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
                    self.context?.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
                }
                return
            }
            context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
            return
        }
        self.state = .idle
        defer { self.armIdleTimer(context: context) }
        if case .head(let head)? = self.queued.popFirst() {
            self.start(head, context: context)
            if self.state == .forwarding { self.drainQueue() }
            if case .answering(let response) = self.state {
                // A pipelined request netcond answers: its queued parts are dropped up to its end.
                while let part = self.queued.popFirst() {
                    if case .end = part {
                        self.answer(response, context: context)
                        return
                    }
                }
            }
        }
        self.resumeReadingIfPossible()
    }

    /// netcond's own answer, once the request has been read; the connection stays usable.
    private func answer(_ response: CannedResponse, context: ChannelHandlerContext) {
        self.state = .forwarding
        self.requestEnded = true
        self.upstreamResponse(.head(response.head(keepAlive: self.requestKeepAlive)))
        if !response.body.isEmpty && !self.requestIsHead {
            self.upstreamResponse(.body(context.channel.allocator.buffer(bytes: response.body)))
        }
        self.upstreamResponse(.end(nil))
    }

    /// The upstream connection could not be made. A refused or timed-out connection is a
    /// transport failure, so the client gets one (a reset, at the moment the emulated link
    /// reports it), not an HTTP answer of netcond's own: a client retries a 502 it would never
    /// retry as a refused connection, and the other way round. Through a proxy it still is a
    /// reset after a connect that succeeded, not `ECONNREFUSED` at connect, and the scenario
    /// checks say so. A name that does not resolve is a 502: the proxy resolves names for the
    /// client, and there is no transport failure to mirror.
    private func failConnect(_ error: UpstreamError, context: ChannelHandlerContext) {
        switch error {
        case .nameNotResolved, .loop:
            self.fail(error.httpStatus, error.description, context: context)
        case .refused, .timedOut, .abandoned:
            self.state = .closed
            context.triggerUserOutboundEvent(CloseWhenDrained(reset: true), promise: nil)
        }
    }

    private func fail(_ status: Int, _ reason: String, context: ChannelHandlerContext) {
        self.state = .closed
        let response = CannedResponse.text(status, "netcond: \(reason)\n")
        context.write(self.wrapOutboundOut(.head(response.head(keepAlive: false))), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
    }

    /// After a `101 Switching Protocols`: the HTTP handlers leave both pipelines and a glue pair
    /// joins them; bytes either decoder still holds (sent right behind the request or the 101)
    /// go on through the glue.
    private func switchToTunnel(context: ChannelHandlerContext) {
        guard let upstream = self.upstream, let upstreamHandler = self.upstreamHandler else {
            self.state = .closed
            return context.triggerUserOutboundEvent(CloseWhenDrained(), promise: nil)
        }
        self.state = .tunnel
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

    private func openTunnel(to target: UpstreamTarget, context: ChannelHandlerContext) {
        let flow = self.shaper.prepareFlow()
        self.pendingConnect = self.connector.connect(to: target, flow: flow) { [weak self] result in
            self?.pendingConnect = nil
            guard let self, let context = self.context, self.state == .tunnel else {
                if case .success(let channel) = result { channel.close(promise: nil) }
                return
            }
            switch result {
            case .failure(let error):
                self.failConnect(error, context: context)
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

/// The upstream end of an HTTP proxy exchange: hands response parts to the client's handler and
/// reads only while the client (and its emulated link) can take more.
final class UpstreamHTTPHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private weak var owner: HTTPProxyHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var closedReported = false

    init(owner: HTTPProxyHandler) {
        self.owner = owner
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.owner?.upstreamResponse(self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.owner?.upstreamFlush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.reportClosed(error: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.reportClosed(error: error)
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // EOF-delimited bodies end here; the decoder has already emitted `.end` for them.
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.owner?.upstreamWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if self.owner?.clientWritable ?? true {
            context.read()
        } else {
            self.pendingRead = true
        }
    }

    func resumeReading() {
        if self.pendingRead, let context = self.context {
            self.pendingRead = false
            context.read()
        }
    }

    private func reportClosed(error: Error?) {
        guard !self.closedReported else { return }
        self.closedReported = true
        self.owner?.upstreamClosed(error: error)
    }
}
