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

    /// Binds `host:port` (0: any free port); `what` names the API in an error.
    func start(host: String, port: Int, what: String) async throws -> SocketAddress {
        let answer = self.answer
        let limit = self.maxBodyBytes
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(JSONHTTPHandler(maxBodyBytes: limit, answer: answer))
                }
            }
        let channel: Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            throw ProxyStartError(description: "cannot listen for \(what) on \(host):\(port): \(ProxyServer.reason(error))")
        }
        self.channel.withLockedValue { $0 = channel }
        guard let address = channel.localAddress else {
            throw ProxyStartError(description: "cannot listen for \(what) on \(host):\(port): no local address")
        }
        ProcessListeners.add(address, .api)
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

private final class JSONHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answer: @Sendable (JSONHTTPRequest) async -> JSONHTTPResponse
    private let maxBodyBytes: Int
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(maxBodyBytes: Int, answer: @escaping @Sendable (JSONHTTPRequest) async -> JSONHTTPResponse) {
        self.maxBodyBytes = maxBodyBytes
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
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
            let keepAlive = head.isKeepAlive
            let request = JSONHTTPRequest(
                method: head.method.rawValue, target: head.uri,
                headers: head.headers.map { (name: $0.name, value: $0.value) }, body: self.body, tooLarge: self.tooLarge)
            self.body = []
            let answer = self.answer
            context.eventLoop.makeFutureWithTask { await answer(request) }
                .assumeIsolated()
                .whenComplete { result in
                    let response = (try? result.get())
                        ?? JSONHTTPResponse(status: 500, json: ControlError(error: "netcond has stopped").controlJSON())
                    CannedResponse(
                        status: response.status, headers: [("Cache-Control", "no-store")] + response.headers, body: response.json,
                        contentType: response.json.isEmpty ? nil : response.contentType
                    ).write(to: context, keepAlive: keepAlive)
                }
        }
    }
}
