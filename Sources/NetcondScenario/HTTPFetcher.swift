import NIOCore
import NIOHTTP1
import NIOPosix
import NetcondCore
import NetcondProxy

/// A minimal HTTP/1.1 client that goes through an HTTP proxy: what `netcond demo` and
/// `netcond fetch` use, so the demo needs no program of the user's.
public struct HTTPFetcher: Sendable {
    public struct Result: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var bodyBytes: Int
        /// From the request to the first byte of the response head.
        public var timeToFirstByte: Span
        public var total: Span
        /// The body, when `keepBody` was set.
        public var body: [UInt8]
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public var proxyHost: String
    public var proxyPort: Int

    public init(proxyHost: String, proxyPort: Int) {
        self.proxyHost = proxyHost
        self.proxyPort = proxyPort
    }

    /// GETs `url` (absolute `http://…`) through the proxy.
    public func get(
        _ url: String,
        keepBody: Bool
    ) async throws -> Result {
        try await self.send(method: "GET", url: url, keepBody: keepBody)
    }

    /// Sends one request for `url` (absolute `http://…`, sent in absolute form to `proxyHost:proxyPort`,
    /// which may be a proxy or the server itself) and reads the whole response.
    public func send(
        method: String,
        url: String,
        body: [UInt8]? = nil,
        contentType: String? = nil,
        headers extraHeaders: [(String, String)] = [],
        keepBody: Bool,
        sink: (@Sendable (_ status: Int, _ body: ByteBuffer) -> Void)? = nil
    ) async throws -> Result {
        guard url.lowercased().hasPrefix("http://") else {
            throw Failure(description: "only http:// URLs can be fetched, got '\(url)'")
        }
        let hostStart = url.index(url.startIndex, offsetBy: 7)
        let host = url[hostStart...].prefix { $0 != "/" && $0 != "?" }
        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: Result.self)
        let started = NIODeadline.now()
        let bootstrap = ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(
                        FetchHandler(started: started, keepBody: keepBody, promise: promise, sink: sink)
                    )
                }
            }
        let channel: Channel
        do {
            channel = try await bootstrap.connect(host: self.proxyHost, port: self.proxyPort).get()
        } catch {
            let failure = Failure(
                description: "cannot connect to \(self.proxyHost):\(self.proxyPort): \(describeConnectError(error))"
            )
            promise.fail(failure)
            throw failure
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: String(host))
        headers.add(name: "User-Agent", value: "netcond")
        headers.add(name: "Connection", value: "close")
        for (name, value) in extraHeaders { headers.add(name: name, value: value) }
        if let body {
            headers.add(name: "Content-Length", value: String(body.count))
            if let contentType { headers.add(name: "Content-Type", value: contentType) }
        }
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: url, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body, !body.isEmpty {
            channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(bytes: body))), promise: nil)
        }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer { channel.close(promise: nil) }
        return try await promise.futureResult.get()
    }
}

private final class FetchHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let started: NIODeadline
    private let keepBody: Bool
    private let promise: EventLoopPromise<HTTPFetcher.Result>
    private let sink: (@Sendable (_ status: Int, _ body: ByteBuffer) -> Void)?
    private var result = HTTPFetcher.Result(
        status: 0,
        headers: [],
        bodyBytes: 0,
        timeToFirstByte: .zero,
        total: .zero,
        body: []
    )

    init(
        started: NIODeadline,
        keepBody: Bool,
        promise: EventLoopPromise<HTTPFetcher.Result>,
        sink: (@Sendable (_ status: Int, _ body: ByteBuffer) -> Void)?
    ) {
        self.started = started
        self.keepBody = keepBody
        self.promise = promise
        self.sink = sink
    }

    private var elapsed: Span {
        Span(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds - self.started.uptimeNanoseconds))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.result.status = Int(head.status.code)
            self.result.headers = head.headers.map { ($0.name, $0.value) }
            self.result.timeToFirstByte = self.elapsed
        case .body(var buffer):
            self.result.bodyBytes += buffer.readableBytes
            self.sink?(self.result.status, buffer)
            if self.keepBody, let bytes = buffer.readBytes(length: buffer.readableBytes) {
                self.result.body += bytes
            }
        case .end:
            self.result.total = self.elapsed
            self.promise.succeed(self.result)
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.promise.fail(HTTPFetcher.Failure(description: "the connection closed before the response ended"))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.promise.fail(HTTPFetcher.Failure(description: "\(error)"))
        context.close(promise: nil)
    }
}
