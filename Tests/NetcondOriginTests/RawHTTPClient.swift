import NIOCore
import NIOPosix

/// A response parsed from raw bytes by ``RawHTTPConnection``.
struct RawResponse {
    var status: Int
    /// Header names lower-cased, in order.
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        self.headers.first(where: { $0.name == name.lowercased() })?.value
    }
}

enum RawHTTPError: Error {
    case malformedResponse(String)
    case connectionClosed(bufferedBytes: Int)
}

/// A deliberately minimal HTTP/1.1 client over a loopback TCP connection: writes raw request bytes, parses
/// `Content-Length`-framed responses, and sees exactly what went over the wire (keep-alive, close, pipelining).
/// Every connection closes itself after `timeout`, so a misbehaving server cannot hang a test.
final class RawHTTPConnection {
    private var iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var buffered: [UInt8] = []
    private(set) var sawEndOfStream = false

    private init(
        iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) {
        self.iterator = iterator
        self.outbound = outbound
    }

    /// Connects to `address`, runs `body` with the connection, then closes it (or closes it after `timeout`).
    static func with<Result>(
        _ address: SocketAddress,
        timeout: TimeAmount = .seconds(30),
        _ body: (RawHTTPConnection) async throws -> Result
    ) async throws -> Result {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connect(to: address) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(isOutboundHalfClosureEnabled: true)
                    )
                }
            }
        let underlying = channel.channel
        let watchdog = underlying.eventLoop.scheduleTask(in: timeout) {
            underlying.close(promise: nil)
        }
        defer { watchdog.cancel() }
        return try await channel.executeThenClose { inbound, outbound in
            let connection = RawHTTPConnection(iterator: inbound.makeAsyncIterator(), outbound: outbound)
            return try await body(connection)
        }
    }

    func send(_ text: String) async throws {
        try await self.outbound.write(ByteBuffer(string: text))
    }

    /// Half-closes: shuts down the sending side, as `printf … | nc -N` does after a request.
    func finishSending() {
        self.outbound.finish()
    }

    /// Sends a `GET` with `Host` and the extra header lines given.
    func sendRequest(_ target: String, headers: [String] = []) async throws {
        try await self.sendRequest("GET", target, headers: headers)
    }

    /// Sends a request without a body, with `Host` and the extra header lines given.
    func sendRequest(_ method: String, _ target: String, headers: [String] = []) async throws {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: origin.netcond.test\r\n"
        for header in headers {
            text += header + "\r\n"
        }
        try await self.send(text + "\r\n")
    }

    /// Reads one response; `isHead` because a HEAD response has a Content-Length but no body.
    func readResponse(isHead: Bool = false) async throws -> RawResponse {
        let headerEnd = try await self.readUntilHeaderEnd()
        let headText = String(decoding: self.buffered[..<headerEnd], as: UTF8.self)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw RawHTTPError.malformedResponse(headText)
        }
        var headers: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw RawHTTPError.malformedResponse(line) }
            headers.append((line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingSpaces))
        }
        self.buffered.removeFirst(headerEnd + 4)
        var response = RawResponse(status: status, headers: headers, body: [])
        if headers.contains(where: { $0.name == "transfer-encoding" }) {
            throw RawHTTPError.malformedResponse("unexpected Transfer-Encoding")
        }
        let hasNoBody = isHead || status == 204 || status == 304 || (100..<200).contains(status)
        if hasNoBody {
            return response
        }
        if let lengthText = response.header("content-length") {
            guard let length = Int(lengthText) else { throw RawHTTPError.malformedResponse(lengthText) }
            while self.buffered.count < length {
                guard try await self.readMore() else {
                    throw RawHTTPError.connectionClosed(bufferedBytes: self.buffered.count)
                }
            }
            response.body = Array(self.buffered[..<length])
            self.buffered.removeFirst(length)
        } else {
            while try await self.readMore() {}
            response.body = self.buffered
            self.buffered = []
        }
        return response
    }

    /// Reads up to `count` body bytes raw (for a client that stops reading early).
    func readRaw(atLeast count: Int) async throws -> [UInt8] {
        while self.buffered.count < count {
            guard try await self.readMore() else { break }
        }
        defer { self.buffered = [] }
        return self.buffered
    }

    /// Waits until the server closes the connection; returns the bytes that came before the end.
    func readUntilClosed() async throws -> [UInt8] {
        while try await self.readMore() {}
        return self.buffered
    }

    private func readUntilHeaderEnd() async throws -> Int {
        var searchFrom = 0
        while true {
            if self.buffered.count >= 4 {
                for index in searchFrom...(self.buffered.count - 4)
                where self.buffered[index] == 13 && self.buffered[index + 1] == 10 && self.buffered[index + 2] == 13
                    && self.buffered[index + 3] == 10
                {
                    return index
                }
                searchFrom = self.buffered.count - 3
            }
            guard try await self.readMore() else {
                throw RawHTTPError.connectionClosed(bufferedBytes: self.buffered.count)
            }
        }
    }

    /// Appends the next inbound bytes; false at end of stream.
    private func readMore() async throws -> Bool {
        guard !self.sawEndOfStream else { return false }
        guard var buffer = try await self.iterator.next() else {
            self.sawEndOfStream = true
            return false
        }
        self.buffered += buffer.readBytes(length: buffer.readableBytes) ?? []
        return true
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        String(
            self.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" })
                .reversed())
    }
}
