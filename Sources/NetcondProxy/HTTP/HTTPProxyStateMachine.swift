import DequeModule
import NIOCore
import NIOHTTP1
import NetcondCore

/// One client connection of the HTTP/1.1 forward proxy, as a value: it takes what happened (a
/// request part, a response part, a connection made or lost, a timer) and returns what to do,
/// in order. It holds no channel, reads no clock and starts no timer; ``HTTPProxyHandler`` carries
/// out its actions.
///
/// ```
///            head                 connected                 request end + response end
///   idle ──────────▶ connecting ────────────▶ forwarding ────────────────────────────▶ idle
///     │  (captive page, status fault)             │  101 Switching Protocols             │ not kept alive
///     ├─────────────▶ answering ──request end─────┤ ───────────────────────▶ tunnel       ▼
///     └─CONNECT──────────────────────────────────────────────────────────▶ tunnel     closed
/// ```
/// Requests are handled one at a time; parts of a pipelined next request wait in `queued` until
/// the current response has ended.
struct HTTPProxyStateMachine {
    enum State: Equatable {
        /// Waiting for a request head.
        case idle
        /// A head arrived; connecting upstream. Later parts wait in `queued`.
        case connecting
        /// Request parts go straight upstream.
        case forwarding
        /// netcond answers this request itself (a fault's status, the captive portal): its parts
        /// are read and dropped until its end.
        case answering(CannedResponse)
        /// The client asked for a tunnel, or the server switched protocols: the HTTP handlers go.
        case tunnel
        case closed
    }

    private(set) var state = State.idle
    private var queued = Deque<HTTPServerRequestPart>()
    private var exchange = Exchange()
    /// Where the open server connection goes (nil: none open).
    private(set) var upstream: UpstreamTarget?
    /// The client sent FIN: the requests it sent before are answered, then the connection closes.
    private var clientInputClosed = false
    /// The response is whole and the server said it closes: the client's connection closes with
    /// the server's (a server that lingers before its FIN is seen lingering).
    private var awaitingServerClose = false
    private var pendingRead = false
    /// The emulated link takes more down bytes.
    private var linkWritable = true
    /// The last request part read was a request's end: what the decoder reads next is a new request.
    private var betweenRequests = true
    /// A malformed request came behind whole ones still being answered: its 400, once they are.
    private var malformedNext: String?
    private let policy: (any HTTPRequestPolicy)?

    init(policy: (any HTTPRequestPolicy)?) {
        self.policy = policy
    }

    /// The connection waits for a head with no server connection behind it (the idle time-out runs).
    var waitsIdle: Bool { self.state == .idle && self.upstream == nil }

    /// Response bytes may go on to the client as far as the link and the faults are concerned (the
    /// client channel's own writability aside).
    var responseMayFlow: Bool { self.linkWritable && self.exchange.responseNotBefore == nil }

    /// A `delay` fault holds the response.
    var responseHeld: Bool { self.exchange.responseNotBefore != nil }

    mutating func linkWritabilityChanged(_ isWritable: Bool) {
        self.linkWritable = isWritable
    }

    // MARK: Client → proxy

    mutating func requestPart(_ part: HTTPServerRequestPart, now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        if case .end = part { self.betweenRequests = true } else { self.betweenRequests = false }
        switch self.state {
        case .idle:
            if case .head(let head) = part {
                actions.append(.cancelIdleTimer)
                self.start(head, now: now, into: &actions)
            }
        case .connecting:
            self.queued.append(part)
        case .forwarding:
            if !self.exchange.requestEnded {
                self.forward(part, now: now, into: &actions)
            } else {
                self.queued.append(part)
            }
        case .answering(let response):
            if case .end = part { self.answer(response, now: now, into: &actions) }
        case .tunnel, .closed:
            break
        }
        return actions
    }

    func requestReadComplete() -> [Action] {
        self.state == .forwarding ? [.flushUpstream] : []
    }

    /// Whether the client may be read now; if not, the read waits for ``takePendingRead()``.
    mutating func mayRead(upstreamWritable: Bool) -> Bool {
        let canRead: Bool
        switch self.state {
        case .idle, .answering, .closed: canRead = true
        case .connecting, .tunnel: canRead = false
        case .forwarding: canRead = !self.exchange.requestEnded && upstreamWritable
        }
        if !canRead { self.pendingRead = true }
        return canRead
    }

    mutating func takePendingRead() -> Bool {
        defer { self.pendingRead = false }
        return self.pendingRead
    }

    /// The client's FIN. `leftBeforeConnecting`: it came while the server connection was still
    /// being made, after the moment it would have been made on an unimpeded link (or for a
    /// tunnel): on a real network the client's request was never sent, so it is not sent now.
    mutating func clientInputClosed(leftBeforeConnecting: Bool) -> [Action] {
        if leftBeforeConnecting {
            self.state = .closed
            return [.abandonConnect, .closeClientNow]
        }
        self.clientInputClosed = true
        return self.state == .idle ? [.closeClient(CloseWhenDrained())] : []
    }

    mutating func clientClosed() -> [Action] {
        self.state = .closed
        self.upstream = nil
        return [.abandonConnect, .closeUpstream]
    }

    /// A malformed request: nothing after it can be trusted. One 400 saying so, and the connection
    /// ends. When it came behind whole requests still being answered (pipelined, or sent while the
    /// server connection was being made), those are answered first, as a server reading them in
    /// order would: the 400 follows the last of them. When it is the request being answered (its
    /// body broke off mid-way), a response already on its way is cut short instead.
    mutating func malformedRequest(_ explanation: String) -> [Action] {
        guard self.state != .closed else { return [] }
        let reason = "malformed request: \(explanation); send an HTTP/1.1 request with an absolute URL or CONNECT host:port"
        // The request being answered is whole (its end read): what broke is a later one.
        let currentWhole: Bool
        switch self.state {
        case .connecting: currentWhole = self.queued.contains { if case .end = $0 { true } else { false } }
        case .forwarding: currentWhole = self.exchange.requestEnded
        case .idle, .answering, .tunnel, .closed: currentWhole = false
        }
        if self.state != .idle && (self.betweenRequests || currentWhole) {
            // The broken request's parts read so far are dropped: it never goes upstream.
            while let last = self.queued.last {
                if case .end = last { break }
                self.queued.removeLast()
            }
            self.malformedNext = reason
            return []
        }
        var actions: [Action] = [.abandonConnect, .closeUpstream]
        self.upstream = nil
        if self.exchange.responseStarted && !self.exchange.responseEnded {
            self.state = .closed
            actions.append(.closeClient(CloseWhenDrained()))
        } else {
            self.fail(400, reason, into: &actions)
        }
        return actions
    }

    mutating func idleTimedOut() -> [Action] {
        guard self.waitsIdle else { return [] }
        self.state = .closed
        return [.closeClientNow]
    }

    // MARK: Starting a request

    private mutating func start(_ head: HTTPRequestHead, now: NIODeadline, into actions: inout [Action]) {
        self.exchange = Exchange(keepAlive: head.isKeepAlive)
        if let problem = HTTPRequestRouting.framingProblem(head) {
            return self.fail(400, problem, into: &actions)
        }
        if head.method == .CONNECT {
            guard let target = UpstreamTarget(authority: head.uri, defaultPort: nil) else {
                return self.fail(400, "CONNECT needs host:port, got '\(head.uri)'", into: &actions)
            }
            self.state = .tunnel
            actions.append(.openTunnel(target))
            return
        }
        let target: UpstreamTarget
        let path: String
        switch HTTPRequestRouting.route(head) {
        case .success(let routed): (target, path) = routed
        case .failure(let problem): return self.fail(400, problem.message, into: &actions)
        }
        self.exchange.isHead = head.method == .HEAD
        if let answer = self.policy?.captiveAnswer(method: head.method.rawValue, host: target.host, path: path, now: now) {
            self.state = .answering(answer)
            return
        }
        self.exchange.fault = self.policy?.decide(FaultRequest(method: head.method.rawValue, host: target.host, path: path), now: now)
        switch self.exchange.fault {
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
        case .delay(let delay)?:
            self.exchange.responseNotBefore = now + .nanoseconds(delay.nanoseconds)
        default:
            break
        }
        let upstreamHead = HTTPRequestRouting.upstreamHead(head, target: target, path: path)
        if self.upstream == target {
            self.state = .forwarding
            self.forward(.head(upstreamHead), now: now, into: &actions)
            return
        }
        if self.upstream != nil {
            actions.append(.closeUpstream)
            self.upstream = nil
        }
        self.state = .connecting
        self.queued.prepend(.head(upstreamHead))
        actions.append(.connect(target))
    }

    /// The server connection for the waiting request is made (and set up).
    mutating func upstreamConnected(_ target: UpstreamTarget, now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        self.upstream = target
        self.state = .forwarding
        self.drainQueue(now: now, into: &actions)
        actions.append(.flushUpstream)
        actions.append(.resumeReadingIfPending)
        return actions
    }

    /// The server connection could not be set up on this side (its handlers).
    mutating func upstreamSetupFailed(_ reason: String) -> [Action] {
        var actions: [Action] = []
        self.fail(502, "cannot set up the upstream connection: \(reason)", into: &actions)
        return actions
    }

    /// The server connection (a request's or a tunnel's) could not be made. A refused or
    /// timed-out connection is a transport failure, so the client gets one (a reset, at the moment
    /// the emulated link reports it), not an HTTP answer of netcond's own: a client retries a 502
    /// it would never retry as a refused connection, and the other way round. A name that does not
    /// resolve is a 502: the proxy resolves names for the client, and there is no transport
    /// failure to mirror.
    mutating func connectFailed(_ error: UpstreamError) -> [Action] {
        var actions: [Action] = []
        self.queued.removeAll()
        switch error {
        case .nameNotResolved, .loop:
            self.fail(error.httpStatus, error.description, into: &actions)
        case .refused, .timedOut, .abandoned:
            self.state = .closed
            actions.append(.closeClient(CloseWhenDrained(reset: true)))
        }
        return actions
    }

    private mutating func drainQueue(now: NIODeadline, into actions: inout [Action]) {
        while self.state == .forwarding, !self.exchange.requestEnded, let part = self.queued.popFirst() {
            self.forward(part, now: now, into: &actions)
        }
    }

    private mutating func forward(_ part: HTTPServerRequestPart, now: NIODeadline, into actions: inout [Action]) {
        guard self.upstream != nil else { return }
        switch part {
        case .head(let head):
            actions.append(.forward(.head(head), flush: false))
        case .body(let body):
            actions.append(.forward(.body(.byteBuffer(body)), flush: false))
        case .end(let trailers):
            actions.append(.forward(.end(trailers), flush: true))
            self.exchange.requestEnded = true
            self.finishIfDone(now: now, into: &actions)
        }
    }

    // MARK: Server → client

    mutating func responsePart(_ part: HTTPClientResponsePart, now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        self.respond(part, now: now, into: &actions)
        return actions
    }

    private mutating func respond(_ part: HTTPClientResponsePart, now: NIODeadline, into actions: inout [Action]) {
        guard self.state == .forwarding else { return }
        if case .head(let head) = part, (100..<200).contains(head.status.code), head.status != .switchingProtocols {
            // Not the response yet: it goes straight on (faults and holds apply to the response).
            actions.append(.write(.head(head), flush: true))
            return
        }
        if let notBefore = self.exchange.responseNotBefore {
            // `delay`: the response waits (and the server is not read meanwhile).
            self.exchange.held.append(part)
            if !self.exchange.releaseScheduled {
                self.exchange.releaseScheduled = true
                actions.append(.releaseAt(notBefore))
            }
            return
        }
        switch part {
        case .head(var head):
            if self.exchange.fault == .dropResponse {
                // Processed upstream, never answered: the client sees the connection close.
                self.state = .closed
                self.upstream = nil
                actions.append(contentsOf: [.closeUpstream, .closeClient(CloseWhenDrained())])
                return
            }
            if self.exchange.fault == .hang {
                // Processed upstream, never answered: the client's connection stays open and silent
                // (what it sends is read and dropped) until it gives up.
                self.state = .closed
                self.upstream = nil
                actions.append(.closeUpstream)
                return
            }
            if case .slowClose = self.exchange.fault {
                head.headers.replaceOrAdd(name: "Connection", value: "close")
            }
            if let altered = head.headers.first(where: { $0.name.contains("\u{FFFD}") || $0.value.contains("\u{FFFD}") }) {
                actions.append(.noteAlteredHeader(altered.name, host: self.upstream?.host ?? ""))
            }
            self.exchange.responseStarted = true
            self.exchange.responseStatus = head.status
            if !head.isKeepAlive {
                self.exchange.keepAlive = false
                self.exchange.serverCloses = true
            }
            actions.append(.write(.head(head), flush: false))
        case .body(var buffer):
            switch self.exchange.fault {
            case .cut(let limit, let end)?:
                let room = max(0, Int(clamping: limit.bytes) - self.exchange.responseBodyBytes)
                if buffer.readableBytes >= room {
                    return self.cut(after: buffer.readSlice(length: room)!, reset: end == .reset, into: &actions)
                }
            default:
                break
            }
            self.exchange.responseBodyBytes += buffer.readableBytes
            actions.append(.write(.body(.byteBuffer(buffer)), flush: false))
        case .end(let trailers):
            actions.append(.write(.end(trailers), flush: true))
            self.exchange.responseEnded = true
            if self.exchange.responseStatus == .switchingProtocols {
                // The server switched protocols (a WebSocket): what follows is no longer HTTP.
                guard self.upstream != nil else {
                    self.state = .closed
                    return actions.append(.closeClient(CloseWhenDrained()))
                }
                self.state = .tunnel
                self.upstream = nil
                return actions.append(.switchToTunnel)
            }
            self.finishIfDone(now: now, into: &actions)
        }
    }

    /// `delay`: the wait is over; what was held goes out in order, then the server is read again.
    mutating func releaseHeld(now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        let held = self.exchange.held
        self.exchange.held = []
        self.exchange.releaseScheduled = false
        self.exchange.responseNotBefore = nil
        for part in held { self.respond(part, now: now, into: &actions) }
        actions.append(.flushClient)
        if let reset = self.exchange.closedWhileHeld {
            self.exchange.closedWhileHeld = nil
            self.upstreamClosed(reset: reset, into: &actions)
        }
        actions.append(.resumeUpstreamReading)
        return actions
    }

    /// `cut_after`: the last bytes the client gets, then a FIN or a reset.
    private mutating func cut(after last: ByteBuffer, reset: Bool, into actions: inout [Action]) {
        self.state = .closed
        self.upstream = nil
        self.exchange.responseBodyBytes += last.readableBytes
        actions.append(.closeUpstream)
        if reset {
            actions.append(.writeThenReset(last))
        } else {
            actions.append(contentsOf: [.write(.body(.byteBuffer(last)), flush: true), .closeClient(CloseWhenDrained())])
        }
    }

    /// The server closed its connection (`reset`: with a reset).
    mutating func upstreamClosed(reset: Bool) -> [Action] {
        var actions: [Action] = []
        self.upstreamClosed(reset: reset, into: &actions)
        return actions
    }

    private mutating func upstreamClosed(reset: Bool, into actions: inout [Action]) {
        self.upstream = nil
        if self.awaitingServerClose {
            self.awaitingServerClose = false
            return actions.append(.closeClient(CloseWhenDrained(reset: reset, crossesLink: true)))
        }
        if self.state == .idle && self.queued.isEmpty {
            // The server closed a keep-alive connection between requests (its idle time-out): the
            // client sees its connection close, as it would without netcond, instead of one that
            // silently reconnects for its next request. A client that reuses a connection the
            // server has just closed must cope with that, and is judged on it.
            self.state = .closed
            return actions.append(.closeClient(CloseWhenDrained(reset: reset, crossesLink: true)))
        }
        guard self.state == .forwarding else { return }
        if self.exchange.responseNotBefore != nil {
            // Held parts first; the close is looked at again once they have gone out.
            self.exchange.closedWhileHeld = reset
            return
        }
        if self.exchange.responseEnded { return }
        // No response, or one cut short: the client sees what the server did, a FIN or a reset,
        // when it would have crossed the link; never an answer of netcond's own (a 502 here would
        // be retried by clients that would not retry a lost response, and taken as a result by
        // others).
        self.state = .closed
        actions.append(.closeClient(CloseWhenDrained(reset: reset, crossesLink: true)))
    }

    /// The server's response could not be read as HTTP (bytes that are not a status line, an
    /// HTTP/0.9 answer, `Content-Length` beside `Transfer-Encoding`, a bad chunk). The proxy cannot
    /// pass on what it could not parse: before a response began, the client gets a 502 saying so,
    /// as a forward proxy answers; after, its response ends cut short. Either way the event is noted.
    mutating func upstreamMalformed(_ reason: String) -> [Action] {
        var actions: [Action] = []
        let target = self.upstream
        self.upstream = nil
        actions.append(.noteMalformed(reason, host: target?.description ?? "the server"))
        guard self.state == .forwarding, !self.exchange.responseEnded else {
            if self.state != .closed {
                self.state = .closed
                actions.append(.closeClient(CloseWhenDrained()))
            }
            return actions
        }
        self.queued.removeAll()
        let began = self.exchange.responseStarted && self.exchange.held.isEmpty
        // What a `delay` fault held back never goes out now.
        self.exchange.held = []
        self.exchange.responseNotBefore = nil
        guard began else {
            self.fail(502, "the response of \(target?.description ?? "the server") is not HTTP netcond can read: \(reason)", into: &actions)
            return actions
        }
        // Part of it reached the client (or waits to): it ends there, cut short.
        self.state = .closed
        actions.append(.closeClient(CloseWhenDrained(reset: false, crossesLink: true)))
        return actions
    }

    // MARK: Ending an exchange

    private mutating func finishIfDone(now: NIODeadline, into actions: inout [Action]) {
        guard self.exchange.requestEnded && self.exchange.responseEnded else { return }
        let nextRequestQueued = self.queued.contains { if case .head = $0 { true } else { false } }
        if let malformed = self.malformedNext, self.exchange.keepAlive, !nextRequestQueued {
            // Every whole request before the malformed one has its answer: now the 400.
            if self.upstream != nil {
                self.upstream = nil
                actions.append(.closeUpstream)
            }
            return self.fail(400, malformed, into: &actions)
        }
        if !self.exchange.keepAlive || (self.clientInputClosed && !nextRequestQueued) {
            self.state = .closed
            let lingers = if case .slowClose = self.exchange.fault { true } else { false }
            if self.exchange.serverCloses && self.upstream != nil && !lingers {
                self.awaitingServerClose = true
                return
            }
            if self.upstream != nil {
                self.upstream = nil
                actions.append(.closeUpstream)
            }
            if case .slowClose(let delay) = self.exchange.fault {
                // The response is complete; the connection lingers before it closes.
                return actions.append(.closeLater(.nanoseconds(delay.nanoseconds)))
            }
            return actions.append(.closeClient(CloseWhenDrained()))
        }
        self.state = .idle
        defer { actions.append(.rearmIdleTimer) }
        if case .head(let head)? = self.queued.popFirst() {
            self.start(head, now: now, into: &actions)
            if self.state == .forwarding { self.drainQueue(now: now, into: &actions) }
            if case .answering(let response) = self.state {
                // A pipelined request netcond answers: its queued parts are dropped up to its end.
                while let part = self.queued.popFirst() {
                    if case .end = part {
                        return self.answer(response, now: now, into: &actions)
                    }
                }
            }
        }
        actions.append(.resumeReadingIfPending)
    }

    /// netcond's own answer, once the request has been read; the connection stays usable.
    private mutating func answer(_ response: CannedResponse, now: NIODeadline, into actions: inout [Action]) {
        self.state = .forwarding
        self.exchange.requestEnded = true
        self.respond(.head(response.head(keepAlive: self.exchange.keepAlive)), now: now, into: &actions)
        if !response.body.isEmpty && !self.exchange.isHead {
            self.respond(.body(ByteBuffer(bytes: response.body)), now: now, into: &actions)
        }
        self.respond(.end(nil), now: now, into: &actions)
    }

    /// netcond's own error answer, then the connection closes.
    private mutating func fail(_ status: Int, _ reason: String, into actions: inout [Action]) {
        self.state = .closed
        let response = CannedResponse.text(status, "netcond: \(reason)\n")
        actions.append(.write(.head(response.head(keepAlive: false)), flush: false))
        actions.append(.write(.body(.byteBuffer(ByteBuffer(bytes: response.body))), flush: false))
        actions.append(.write(.end(nil), flush: true))
        actions.append(.closeClient(CloseWhenDrained()))
    }
}
