import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore

@testable import NetcondOrigin

/// A clock the test sets by hand, for exact request-log timestamps.
final class ManualClock: Sendable {
    private let box = LockedBox(Instant.zero)

    var now: Instant {
        get { self.box.withLock { $0 } }
        set { self.box.withLock { $0 = newValue } }
    }

    var originClock: OriginClock {
        OriginClock { self.now }
    }
}

/// A response read back from an `EmbeddedChannel`: the head, the body bytes, and whether `.end` was written.
struct EmbeddedResponse {
    var head: HTTPResponseHead?
    var body: [UInt8] = []
    var ended = false
    var bodyParts = 0
}

extension EmbeddedChannel {
    /// Sends one request (head, optional body, end) as the HTTP decoder would deliver it.
    func sendRequest(
        _ method: HTTPMethod,
        _ target: String,
        headers: [(String, String)] = [],
        version: HTTPVersion = .http1_1,
        body: String? = nil
    ) throws {
        let head = HTTPRequestHead(version: version, method: method, uri: target, headers: HTTPHeaders(headers))
        try self.writeInbound(HTTPServerRequestPart.head(head))
        if let body {
            try self.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: body)))
        }
        try self.writeInbound(HTTPServerRequestPart.end(nil))
    }

    /// Reads every response part written so far, appending to `response`.
    func readResponseParts(into response: inout EmbeddedResponse) throws {
        while let part = try self.readOutbound(as: HTTPServerResponsePart.self) {
            switch part {
            case .head(let head):
                response.head = head
            case .body(.byteBuffer(var buffer)):
                response.body += buffer.readBytes(length: buffer.readableBytes) ?? []
                response.bodyParts += 1
            case .body:
                break
            case .end:
                response.ended = true
            }
        }
    }

    func readResponse() throws -> EmbeddedResponse {
        var response = EmbeddedResponse()
        try self.readResponseParts(into: &response)
        return response
    }
}

/// A handler on an active `EmbeddedChannel`, with the log and clock it writes to.
struct EmbeddedOrigin {
    let channel: EmbeddedChannel
    let log: OriginRequestLog
    let clock: ManualClock

    init(chunkSize: Int = 64 * 1024, chunksPerTurn: Int = 16, content: OriginContent = OriginContent()) throws {
        self.log = OriginRequestLog()
        self.clock = ManualClock()
        let configuration = OriginConfiguration(clock: self.clock.originClock, chunkSize: chunkSize, content: content)
        let handler = OriginHTTPHandler(
            router: OriginRouter(configuration: configuration),
            log: self.log,
            clock: configuration.clock,
            connectionID: 0,
            chunkSize: chunkSize,
            chunksPerTurn: chunksPerTurn
        )
        self.channel = EmbeddedChannel(handler: handler)
        try self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
    }
}
