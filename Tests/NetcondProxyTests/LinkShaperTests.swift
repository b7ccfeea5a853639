import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// The shaper in virtual time: `EmbeddedEventLoop.advanceTime` drives the link.
@Suite struct LinkShaperTests {
    func makeChannel(_ profile: Profile) throws -> (EmbeddedChannel, LinkShaper) {
        let loop = EmbeddedEventLoop()
        let driver = LinkDriver(profile: profile, seed: 1, eventLoop: loop)
        let shaper = LinkShaper(driver: driver, stats: ProxyStats())
        let channel = EmbeddedChannel(handler: shaper, loop: loop)
        return (channel, shaper)
    }

    func symmetric(latency: Span, bandwidth: Bandwidth? = nil) -> Profile {
        let direction = LinkDirection(latency: latency, bandwidth: bandwidth)
        return Profile(name: "t", up: direction, down: direction)
    }

    @Test func passiveUntilShapingBegins() throws {
        let (channel, _) = try self.makeChannel(self.symmetric(latency: .milliseconds(100)))
        try channel.writeInbound(ByteBuffer(string: "CONNECT x:443 HTTP/1.1\r\n\r\n"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "CONNECT x:443 HTTP/1.1\r\n\r\n"))
        try channel.writeOutbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n"))
    }

    @Test func upAndDownWaitExactlyTheLatency() throws {
        let (channel, shaper) = try self.makeChannel(self.symmetric(latency: .milliseconds(100)))
        shaper.beginShaping()
        try channel.writeInbound(ByteBuffer(string: "request"))
        channel.writeAndFlush(ByteBuffer(string: "response"), promise: nil)
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(99))
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "request"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "response"))
    }

    @Test func bytesKeepTheirOrderAndContentAcrossSegments() throws {
        // 240 kbit/s: each 1460-byte segment takes 50 ms on the link.
        let (channel, shaper) = try self.makeChannel(self.symmetric(latency: .milliseconds(10), bandwidth: .kbit(240)))
        shaper.beginShaping()
        var expected: [UInt8] = []
        for chunk in 0..<5 {
            let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7 + chunk) }
            expected += bytes
            channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        }
        var received: [UInt8] = []
        var steps = 0
        while received.count < expected.count && steps < 100 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(10))
            while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
                received += buffer.readBytes(length: buffer.readableBytes) ?? []
            }
            steps += 1
        }
        #expect(received == expected)
        // Five writes at one instant become five 1000-byte segments (no Nagle): each takes
        // 1040 × 8 / 240 kbit = 34.67 ms on the link, so the last arrives at 173.3 ms + 10 ms.
        #expect(steps == 19)
    }

    @Test func halfCloseWaitsForDataBeforeIt() throws {
        let (channel, shaper) = try self.makeChannel(self.symmetric(latency: .milliseconds(50)))
        shaper.beginShaping()
        channel.writeAndFlush(ByteBuffer(string: "last words"), promise: nil)
        let closed = channel.close(mode: .output)
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        var closedAt: String?
        closed.assumeIsolated().whenComplete { _ in closedAt = "done" }
        #expect(closedAt == nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(50))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "last words"))
        #expect(closedAt == "done")
    }

    @Test func inputClosedIsDeliveredAfterTheBytes() throws {
        let (channel, shaper) = try self.makeChannel(self.symmetric(latency: .milliseconds(50)))
        let recorder = EventRecorder()
        try channel.pipeline.syncOperations.addHandler(recorder)
        shaper.beginShaping()
        try channel.writeInbound(ByteBuffer(string: "abc"))
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(recorder.events.isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(50))
        #expect(recorder.events == ["read abc", "inputClosed"])
    }

    @Test func stopsReadingWhenTheLinkIsBehind() throws {
        // 8 kbit/s: 1 KB takes a second; after the send buffer fills, reads are held back.
        let (channel, shaper) = try self.makeChannel(self.symmetric(latency: .zero, bandwidth: .kbit(8)))
        shaper.beginShaping()
        let counter = ReadCounter()
        try channel.pipeline.syncOperations.addHandler(counter, position: .first)
        channel.read()
        #expect(counter.reads == 1)
        try channel.writeInbound(ByteBuffer(repeating: 1, count: LinkModel.minimumSendBuffer + 100_000))
        channel.read()
        #expect(counter.reads == 1)
        channel.embeddedEventLoop.advanceTime(by: .seconds(3600))
        #expect(counter.reads == 2)
    }
}

final class EventRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var events: [String] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.events.append("read \(String(buffer: buffer))")
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { self.events.append("inputClosed") }
    }
}

final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = Never
    var reads = 0

    func read(context: ChannelHandlerContext) {
        self.reads += 1
        context.read()
    }
}

/// A run whose conditions may be switched live keeps a link model even while the link changes
/// nothing; bytes then skip it, and cross it again, in order, once conditions change.
@Suite struct LinkShaperTransparencyTests {
    @Test func bytesSkipATransparentLinkAndAreShapedOnceItChangesWithoutReordering() throws {
        let loop = EmbeddedEventLoop()
        let driver = LinkDriver(profile: .passThrough, seed: 1, eventLoop: loop)
        let shaper = LinkShaper(driver: driver, stats: ProxyStats())
        let channel = EmbeddedChannel(handler: shaper, loop: loop)
        shaper.beginShaping()
        #expect(driver.model.isTransparent)
        channel.writeAndFlush(ByteBuffer(string: "a"), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "a"))
        try channel.writeInbound(ByteBuffer(string: "q"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "q"))

        let slow = LinkDirection(latency: .milliseconds(100))
        driver.switchProfile(to: Profile(name: "slow", up: slow, down: slow))
        #expect(!driver.model.isTransparent)
        channel.writeAndFlush(ByteBuffer(string: "b"), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        // Back to nothing while "b" is still on the link: "c" must wait behind it.
        driver.switchProfile(to: .passThrough)
        #expect(driver.model.isTransparent)
        channel.writeAndFlush(ByteBuffer(string: "c"), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        loop.advanceTime(by: .milliseconds(100))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "b"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "c"))
        channel.writeAndFlush(ByteBuffer(string: "d"), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "d"))
    }

    @Test func anOutageOrAStallMakesAnEmptyLinkOpaque() throws {
        let driver = LinkDriver(profile: .passThrough, seed: 1, eventLoop: EmbeddedEventLoop())
        driver.setOutage(.blackhole)
        #expect(!driver.model.isTransparent)
        driver.setOutage(nil)
        driver.setStall(.up)
        #expect(!driver.model.isTransparent)
        driver.setStall(nil)
        #expect(driver.model.isTransparent)
        driver.switchProfile(to: try ProfileCatalog.resolve("high-latency-dns"))
        #expect(!driver.model.isTransparent)
    }
}

extension LinkShaperTests {
    @Test func theFarEndsCloseTakesTheDownDelayInForce() throws {
        // 50 ms each way until 10 s, 400 ms after: a close asked for at 20 s waits 400 ms.
        let series = "0, 1000mbit, 50ms, 0%; 10, 1000mbit, 400ms, 0%"
        let yaml = "name: slower\nlink: {trace: {source: slower, series: \"\(series)\"}}"
        let profile = try ProfileDecoder().decode(yaml: yaml, file: "Profiles/slower.yaml")
        let (channel, shaper) = try self.makeChannel(profile)
        channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        shaper.beginShaping()
        var closed = false
        channel.closeFuture.assumeIsolated().whenComplete { _ in closed = true }
        channel.pipeline.triggerUserOutboundEvent(CloseWhenDrained(reset: false, crossesLink: true), promise: nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(399))
        #expect(!closed)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(closed)
    }
}
