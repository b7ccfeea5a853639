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

    // The machine's state, shared with its extensions in HTTPProxyStateMachine+Response.swift:
    // only the machine changes it.
    var state = State.idle
    var queued = Deque<HTTPServerRequestPart>()
    var exchange = Exchange()
    /// Where the open server connection goes (nil: none open).
    var upstream: UpstreamTarget?
    /// The client sent FIN: the requests it sent before are answered, then the connection closes.
    var clientInputClosed = false
    /// The response is whole and the server said it closes: the client's connection closes with
    /// the server's (a server that lingers before its FIN is seen lingering).
    var awaitingServerClose = false
    var pendingRead = false
    /// The emulated link takes more down bytes.
    var linkWritable = true
    /// The last request part read was a request's end: what the decoder reads next is a new request.
    var betweenRequests = true
    /// A malformed request came behind whole ones still being answered: its 400, once they are.
    var malformedNext: String?
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
        if self.awaitingServerClose {
            // The client's FIN would reach the server, which then closes: both end now.
            self.awaitingServerClose = false
            self.upstream = nil
            return [.closeUpstream, .closeClient(CloseWhenDrained())]
        }
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
        let reason =
            "malformed request: \(explanation); send an HTTP/1.1 request with an absolute URL or CONNECT host:port"
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

    mutating func start(_ head: HTTPRequestHead, now: NIODeadline, into actions: inout [Action]) {
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
        if let answer = self.policy?.captiveAnswer(
            method: head.method.rawValue, host: target.host, path: path, now: now)
        {
            self.state = .answering(answer)
            return
        }
        self.exchange.fault = self.policy?.decide(
            FaultRequest(method: head.method.rawValue, host: target.host, path: path, port: target.port), now: now)
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

    mutating func drainQueue(now: NIODeadline, into actions: inout [Action]) {
        while self.state == .forwarding, !self.exchange.requestEnded, let part = self.queued.popFirst() {
            self.forward(part, now: now, into: &actions)
        }
    }

    mutating func forward(_ part: HTTPServerRequestPart, now: NIODeadline, into actions: inout [Action]) {
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

    // MARK: Ending an exchange

    mutating func finishIfDone(now: NIODeadline, into actions: inout [Action]) {
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
    mutating func answer(_ response: CannedResponse, now: NIODeadline, into actions: inout [Action]) {
        self.state = .forwarding
        self.exchange.requestEnded = true
        self.respond(.head(response.head(keepAlive: self.exchange.keepAlive)), now: now, into: &actions)
        // netcond's own answer: the server behind it said nothing, and does not close for it.
        self.exchange.serverCloses = false
        if !response.body.isEmpty && !self.exchange.isHead {
            self.respond(.body(ByteBuffer(bytes: response.body)), now: now, into: &actions)
        }
        self.respond(.end(nil), now: now, into: &actions)
    }

    /// netcond's own error answer, then the connection closes.
    mutating func fail(_ status: Int, _ reason: String, into actions: inout [Action]) {
        self.state = .closed
        let response = CannedResponse.text(status, "netcond: \(reason)\n")
        actions.append(.write(.head(response.head(keepAlive: false)), flush: false))
        actions.append(.write(.body(.byteBuffer(ByteBuffer(bytes: response.body))), flush: false))
        actions.append(.write(.end(nil), flush: true))
        actions.append(.closeClient(CloseWhenDrained()))
    }
}
