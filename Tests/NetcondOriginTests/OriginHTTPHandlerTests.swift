import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondOrigin

/// The connection handler on an `EmbeddedChannel`: exact bytes, writability and virtual time, no sockets.
@Suite("OriginHTTPHandler")
struct OriginHTTPHandlerTests {
    @Test("a generated body is streamed in chunks that equal DeterministicBytes, then logged as complete")
    func streamsGeneratedBody() throws {
        let origin = try EmbeddedOrigin(chunkSize: 1000)
        origin.clock.now = Instant(nanoseconds: 5_000)
        try origin.channel.sendRequest(.GET, "/bytes/5500?seed=9", headers: [("Range", "bytes=-7")])
        // The suffix range was not the point; ask again for the full file on the same connection.
        var first = try origin.channel.readResponse()
        #expect(first.head?.status == .partialContent)
        #expect(first.body == DeterministicBytes(seed: 9).bytes(offset: 5493, count: 7))
        #expect(first.ended)

        origin.clock.now = Instant(nanoseconds: 9_000)
        try origin.channel.sendRequest(.GET, "/bytes/5500?seed=9")
        first = try origin.channel.readResponse()
        #expect(first.head?.status == .ok)
        #expect(first.bodyParts == 6)
        #expect(first.body == DeterministicBytes(seed: 9).bytes(offset: 0, count: 5500))
        #expect(first.ended)
        #expect(origin.channel.isActive)

        let entries = origin.log.entries
        #expect(entries.count == 2)
        #expect(entries[0].timestamp == Instant(nanoseconds: 5_000))
        #expect(entries[0].headers.range == "bytes=-7")
        #expect(entries[0].status == 206 && entries[0].bodyBytesSent == 7 && entries[0].completed)
        #expect(entries[1].timestamp == Instant(nanoseconds: 9_000))
        #expect(entries[1].finishedAt == Instant(nanoseconds: 9_000))
        #expect(entries[1].method == "GET" && entries[1].target == "/bytes/5500?seed=9")
        #expect(entries[1].status == 200 && entries[1].bodyBytesSent == 5500 && entries[1].completed)
        _ = try origin.channel.finish()
    }

    @Test("backpressure: nothing is generated while the channel is not writable; writability resumes it")
    func respectsWritability() throws {
        let origin = try EmbeddedOrigin(chunkSize: 100)
        origin.channel.isWritable = false
        try origin.channel.sendRequest(.GET, "/bytes/1000")
        var response = try origin.channel.readResponse()
        #expect(response.head?.status == .ok)
        #expect(response.body.isEmpty)
        #expect(origin.log.entries.first?.isFinished == false)

        origin.channel.isWritable = true
        origin.channel.pipeline.fireChannelWritabilityChanged()
        try origin.channel.readResponseParts(into: &response)
        #expect(response.body == DeterministicBytes(seed: 0).bytes(offset: 0, count: 1000))
        #expect(response.ended)
        #expect(origin.log.entries.first?.completed == true)
        _ = try origin.channel.finish()
    }

    @Test("a long body yields the event loop between turns and still arrives whole")
    func yieldsBetweenTurns() throws {
        let origin = try EmbeddedOrigin(chunkSize: 10, chunksPerTurn: 3)
        try origin.channel.sendRequest(.GET, "/bytes/95?seed=1")
        var response = try origin.channel.readResponse()
        #expect(response.body.count == 30)
        #expect(!response.ended)
        for _ in 0..<10 where !response.ended {
            origin.channel.embeddedEventLoop.run()
            try origin.channel.readResponseParts(into: &response)
        }
        #expect(response.body == DeterministicBytes(seed: 1).bytes(offset: 0, count: 95))
        #expect(response.ended)
        _ = try origin.channel.finish()
    }

    @Test("/delay answers only when the event loop's time has advanced by the delay")
    func delayUsesEventLoopTime() throws {
        let origin = try EmbeddedOrigin()
        try origin.channel.sendRequest(.GET, "/delay/500ms")
        origin.channel.embeddedEventLoop.advanceTime(by: .milliseconds(499))
        #expect(try origin.channel.readResponse().head == nil)
        origin.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        let response = try origin.channel.readResponse()
        #expect(response.head?.status == .ok)
        #expect(String(decoding: response.body, as: UTF8.self) == "{\"delay_ms\": 500}\n")
        #expect(response.ended)
        _ = try origin.channel.finish()
    }

    @Test("a keep-alive connection idle for the keep-alive time-out is closed, as a real server's; one in use is not")
    func keepAliveTimeout() throws {
        let origin = try EmbeddedOrigin()
        try origin.channel.sendRequest(.GET, "/status/200")
        #expect(try origin.channel.readResponse().ended)
        // Idle after its answer: open until the time-out, closed at it.
        origin.channel.embeddedEventLoop.advanceTime(by: OriginHTTPHandler.keepAliveTimeout - .milliseconds(1))
        #expect(origin.channel.isActive)
        try origin.channel.sendRequest(.GET, "/delay/59s")
        origin.channel.embeddedEventLoop.advanceTime(by: .seconds(58))
        #expect(origin.channel.isActive, "a request being answered is not idle, past the first time-out's moment")
        origin.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try origin.channel.readResponse().ended)
        origin.channel.embeddedEventLoop.advanceTime(by: OriginHTTPHandler.keepAliveTimeout - .milliseconds(1))
        #expect(origin.channel.isActive)
        origin.channel.embeddedEventLoop.advanceTime(by: OriginHTTPHandler.keepAliveTimeout)
        #expect(!origin.channel.isActive)
    }

    @Test("a client that goes away during a delay cancels it and is logged as incomplete")
    func delayCancelledOnClose() throws {
        let origin = try EmbeddedOrigin()
        try origin.channel.sendRequest(.GET, "/delay/2s")
        origin.clock.now = Instant(nanoseconds: 1_000_000)
        try origin.channel.close().wait()
        origin.channel.embeddedEventLoop.advanceTime(by: .seconds(3))
        let entry = try #require(origin.log.entries.first)
        #expect(entry.isFinished && !entry.completed)
        #expect(entry.status == nil)
        #expect(entry.finishedAt == Instant(nanoseconds: 1_000_000))
    }

    @Test("a connection closed mid-body is logged with the bytes actually written")
    func closedMidBody() throws {
        let origin = try EmbeddedOrigin(chunkSize: 100)
        origin.channel.isWritable = false
        try origin.channel.sendRequest(.GET, "/bytes/1000", headers: [("Idempotency-Key", "k-1")])
        try origin.channel.close().wait()
        let entry = try #require(origin.log.entries.first)
        #expect(entry.status == 200 && entry.bodyBytesSent == 0 && !entry.completed && entry.isFinished)
        #expect(entry.headers.idempotencyKey == "k-1")
    }

    @Test("Connection: close → the response says so and the channel closes after it")
    func connectionClose() throws {
        let origin = try EmbeddedOrigin()
        try origin.channel.sendRequest(.GET, "/status/200", headers: [("Connection", "close")])
        let response = try origin.channel.readResponse()
        #expect(response.head?.headers["Connection"] == ["close"])
        #expect(String(decoding: response.body, as: UTF8.self) == "200 OK\n")
        #expect(response.ended)
        #expect(!origin.channel.isActive)
    }

    @Test("a half-close during a response lets the response finish, then closes")
    func halfCloseDuringResponse() throws {
        let origin = try EmbeddedOrigin(chunkSize: 100)
        origin.channel.isWritable = false
        try origin.channel.sendRequest(.GET, "/bytes/250")
        origin.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(origin.channel.isActive)
        origin.channel.isWritable = true
        origin.channel.pipeline.fireChannelWritabilityChanged()
        let response = try origin.channel.readResponse()
        #expect(response.body == DeterministicBytes(seed: 0).bytes(offset: 0, count: 250))
        #expect(response.ended)
        #expect(!origin.channel.isActive)
        #expect(origin.log.entries.first?.completed == true)
    }

    @Test("HTTP/1.0 keep-alive is answered with Connection: keep-alive; plain HTTP/1.0 closes")
    func http10() throws {
        let origin = try EmbeddedOrigin()
        try origin.channel.sendRequest(.GET, "/status/200", headers: [("Connection", "keep-alive")], version: .http1_0)
        #expect(try origin.channel.readResponse().head?.headers["Connection"] == ["keep-alive"])
        #expect(origin.channel.isActive)
        try origin.channel.sendRequest(.GET, "/status/200", version: .http1_0)
        #expect(try origin.channel.readResponse().head?.headers["Connection"] == ["close"])
        #expect(!origin.channel.isActive)
    }

    @Test("a POST body is read and discarded, then answered (405 for now)")
    func postBodyDiscarded() throws {
        let origin = try EmbeddedOrigin()
        try origin.channel.sendRequest(.POST, "/bytes/10", body: "{\"order\": 1}")
        let response = try origin.channel.readResponse()
        #expect(response.head?.status == .methodNotAllowed)
        #expect(response.head?.headers["Allow"] == ["GET, HEAD"])
        #expect(response.ended)
        #expect(origin.log.entries.first?.method == "POST")
        _ = try origin.channel.finish()
    }

    @Test("HEAD sends the head and end, no body, and logs zero body bytes")
    func head() throws {
        let origin = try EmbeddedOrigin()
        try origin.channel.sendRequest(.HEAD, "/bytes/1MB")
        let response = try origin.channel.readResponse()
        #expect(response.head?.headers["Content-Length"] == ["1048576"])
        #expect(response.bodyParts == 0 && response.ended)
        #expect(origin.log.entries.first?.bodyBytesSent == 0)
        _ = try origin.channel.finish()
    }
}

@Suite("OriginHTTPHandler interim responses")
struct OriginHTTPHandlerInterimTests {
    @Test("Expect: 100-continue gets a 100 Continue before the body is read")
    func expectContinue() throws {
        let origin = try EmbeddedOrigin()
        let head = HTTPRequestHead(
            version: .http1_1, method: .POST, uri: "/bytes/1KB",
            headers: ["Expect": "100-continue", "Content-Length": "3"])
        try origin.channel.writeInbound(HTTPServerRequestPart.head(head))
        let interim = try origin.channel.readOutbound(as: HTTPServerResponsePart.self)
        #expect(interim == .head(HTTPResponseHead(version: .http1_1, status: .continue)))
        try origin.channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "abc")))
        try origin.channel.writeInbound(HTTPServerRequestPart.end(nil))
        let response = try origin.channel.readResponse()
        #expect(response.head?.status == .methodNotAllowed)
        #expect(response.ended)
        _ = try origin.channel.finish()
    }
}
