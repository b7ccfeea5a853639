import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NetcondCore

/// A request to one of netcond's JSON APIs (the control API, the Toxiproxy API), read whole.
struct JSONHTTPRequest: Sendable {
    var method: String
    var target: String
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// The body was over the server's limit (and `body` is empty).
    var tooLarge: Bool

    var path: String { ControlAPI.path(of: self.target) }
}

/// An answer: a status and a JSON body (empty: none, as for 204), or another type of body (the
/// control API's dashboard page) with headers of its own.
struct JSONHTTPResponse: Sendable {
    var status: Int
    var json: [UInt8]
    var contentType = "application/json"
    var headers: [(String, String)] = []

    init(status: Int, json: [UInt8]) {
        self.status = status
        self.json = json
    }

    init(status: Int, body: [UInt8], contentType: String, headers: [(String, String)]) {
        self.status = status
        self.json = body
        self.contentType = contentType
        self.headers = headers
    }
}

/// HTTP/1.1 plumbing for a JSON API on a loop of its own: reads each request whole (bodies up to
/// `maxBodyBytes`), asks `answer`, writes the answer as `application/json`, keeps the connection
/// alive when the client asks to.
final class JSONHTTPServer: Sendable {
    private let answer: @Sendable (JSONHTTPRequest) async -> JSONHTTPResponse
    private let maxBodyBytes: Int
    private let channel: NIOLockedValueBox<Channel?> = NIOLockedValueBox(nil)

    init(maxBodyBytes: Int, answer: @escaping @Sendable (JSONHTTPRequest) async -> JSONHTTPResponse) {
        self.maxBodyBytes = maxBodyBytes
        self.answer = answer
    }

    /// At most this many connections at once; one beyond is closed as it comes (a client that
    /// opens connections and leaves them cannot take every descriptor from the proxies).
    static let maxConnections = 128
    /// A connection with no request under way must bring a whole request within this time, or is
    /// closed: a slow-loris trickling a head, a keep-alive connection left idle (as the proxy port's).
    static let requestTimeout = TimeAmount.seconds(60)

    private let book = ConnectionBook(limit: JSONHTTPServer.maxConnections)

    /// Binds `host:port` (0: any free port); `what` names the API in an error.
    func start(host: String, port: Int, what: String) async throws -> SocketAddress {
        let answer = self.answer
        let limit = self.maxBodyBytes
        let book = self.book
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                // Out of descriptors: pause accepting for a moment instead of spinning on EMFILE.
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([AcceptFailureReporter(), AcceptBackoffHandler()])
                }
            }
            .childChannelInitializer { channel in
                guard book.admit(channel) else { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        JSONHTTPHandler(maxBodyBytes: limit, book: book, answer: answer))
                }
            }
        let channel: Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            throw ProxyStartError(
                description: "cannot listen for \(what) on \(host):\(port): \(ProxyServer.reason(error))")
        }
        self.channel.withLockedValue { $0 = channel }
        guard let address = channel.localAddress else {
            throw ProxyStartError(description: "cannot listen for \(what) on \(host):\(port): no local address")
        }
        ProcessListeners.add(address, .api, name: what.hasPrefix("the ") ? what : "the \(what) API")
        return address
    }

    func stop() async {
        let channel = self.channel.withLockedValue { channel in
            defer { channel = nil }
            return channel
        }
        if let address = channel?.localAddress { ProcessListeners.remove(address) }
        try? await channel?.close()
    }
}

/// The connections of one JSON server: at most `limit` at once. At the limit a new one takes the
/// place of the one that has waited longest without a whole request (idle, or part of a request
/// sent: a head and no body), so that clients that open connections and leave them, or send half a
/// request, lock nobody out; when every one has a whole request being answered, the new one is closed.
final class ConnectionBook: Sendable {
    private struct Entry {
        var channel: Channel
        /// Since when it has waited with no request under way (nil: one is).
        var idleSince: NIODeadline?
    }

    private let limit: Int
    private let entries = NIOLockedValueBox<[ObjectIdentifier: Entry]>([:])

    init(limit: Int) {
        self.limit = limit
    }

    func admit(_ channel: Channel) -> Bool {
        let id = ObjectIdentifier(channel)
        let (admitted, evicted) = self.entries.withLockedValue { entries -> (Bool, Channel?) in
            var evicted: Channel?
            if entries.count >= self.limit {
                guard
                    let oldest = entries.filter({ $0.value.idleSince != nil }).min(by: {
                        $0.value.idleSince! < $1.value.idleSince!
                    })
                else { return (false, nil) }
                evicted = oldest.value.channel
                entries[oldest.key] = nil
            }
            entries[id] = Entry(channel: channel, idleSince: .now())
            return (true, evicted)
        }
        evicted?.close(promise: nil)
        guard admitted else { return false }
        channel.closeFuture.whenComplete { [entries] _ in entries.withLockedValue { $0[id] = nil } }
        return true
    }

    /// The connection waits for a request from now (`true`), or has one under way (`false`).
    func setIdle(_ channel: Channel, _ idle: Bool) {
        self.entries.withLockedValue { entries in
            entries[ObjectIdentifier(channel)]?.idleSince = idle ? .now() : nil
        }
    }

    var count: Int { self.entries.withLockedValue { $0.count } }
}

private final class JSONHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answer: @Sendable (JSONHTTPRequest) async -> JSONHTTPResponse
    private let maxBodyBytes: Int
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    private var waiting: Scheduled<Void>?
    private let book: ConnectionBook

    init(
        maxBodyBytes: Int, book: ConnectionBook, answer: @escaping @Sendable (JSONHTTPRequest) async -> JSONHTTPResponse
    ) {
        self.maxBodyBytes = maxBodyBytes
        self.book = book
        self.answer = answer
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.awaitRequest(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.waiting?.cancel()
    }

    /// A whole request must come within the time-out (from now: the connection opened, or the
    /// last answer went).
    private func awaitRequest(context: ChannelHandlerContext) {
        self.waiting?.cancel()
        self.book.setIdle(context.channel, true)
        self.waiting = context.eventLoop.assumeIsolated().scheduleTask(in: JSONHTTPServer.requestTimeout) {
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            // Still waiting: a connection counts as busy only once its whole request is in (one
            // that sends a head and no body must not hold a place that a real request needs).
            self.head = head
            self.body = []
            self.tooLarge = false
        case .body(var buffer):
            if self.body.count + buffer.readableBytes > self.maxBodyBytes {
                self.tooLarge = true
                self.body = []
            } else if !self.tooLarge, let bytes = buffer.readBytes(length: buffer.readableBytes) {
                self.body += bytes
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            self.book.setIdle(context.channel, false)
            self.waiting?.cancel()
            self.waiting = nil
            let keepAlive = head.isKeepAlive
            let request = JSONHTTPRequest(
                method: head.method.rawValue, target: head.uri,
                headers: head.headers.map { (name: $0.name, value: $0.value) }, body: self.body, tooLarge: self.tooLarge
            )
            self.body = []
            let answer = self.answer
            context.eventLoop.makeFutureWithTask { await answer(request) }
                .assumeIsolated()
                .whenComplete { result in
                    let response =
                        (try? result.get())
                        ?? JSONHTTPResponse(status: 500, json: ControlError(error: "netcond has stopped").controlJSON())
                    CannedResponse(
                        status: response.status, headers: [("Cache-Control", "no-store")] + response.headers,
                        body: response.json,
                        contentType: response.json.isEmpty ? nil : response.contentType
                    ).write(to: context, keepAlive: keepAlive)
                    if keepAlive && context.channel.isActive { self.awaitRequest(context: context) }
                }
        }
    }
}
