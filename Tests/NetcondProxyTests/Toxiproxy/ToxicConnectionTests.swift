import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// One connection's toxics in virtual time: the client's side of a forward, in an EmbeddedChannel
/// (inbound: what the client sent, upstream; outbound: what reaches it, downstream).
@Suite struct ToxicConnectionTests {
    func channel(_ toxics: [Toxic], seed: UInt64 = 1, index: UInt64 = 1) throws -> (
        EmbeddedChannel, ToxicConnectionHandler
    ) {
        let handler = ToxicConnectionHandler(seed: SeedDeriver.derive(seed, index), wiring: .forward)
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        handler.update(toxics)
        return (channel, handler)
    }

    @Test func timeoutClosesEachConnectionItsTimeAfterItBegan() throws {
        let (channel, handler) = try self.channel([Toxic(name: "t", stream: .downstream, kind: .timeout(timeout: 500))])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(499))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
        _ = handler
        // 0: never closed (the link holds its data meanwhile).
        let (open, _) = try self.channel([Toxic(name: "t", stream: .downstream, kind: .timeout(timeout: 0))])
        open.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(open.isActive)
        _ = try? open.finish()
    }

    @Test func timeoutStartsOverWithEachChunkOfItsStream() throws {
        let (channel, _) = try self.channel([Toxic(name: "t", stream: .upstream, kind: .timeout(timeout: 500))])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(400))
        try channel.writeInbound(ByteBuffer(string: "retry"))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(499))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func resetPeerTakesTheNextDataOfItsStreamAndResetsItsTimeLater() throws {
        let (channel, _) = try self.channel([Toxic(name: "r", stream: .upstream, kind: .resetPeer(timeout: 200))])
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive)  // no data yet
        try channel.writeOutbound(ByteBuffer(string: "downstream data does not arm it"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive)
        try channel.writeInbound(ByteBuffer(string: "GET"))
        // Taken: the server never sees the request.
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(199))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func limitDataPassesExactlyTheLimitThenCloses() throws {
        let (channel, _) = try self.channel([Toxic(name: "l", stream: .downstream, kind: .limitData(bytes: 10))])
        try channel.writeOutbound(ByteBuffer(string: "0123456"))
        #expect(channel.isActive)
        try channel.writeOutbound(ByteBuffer(string: "789abcdef"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "0123456"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "789"))
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
    }

    @Test func limitDataUpstreamCountsWhatTheClientSent() throws {
        let (channel, _) = try self.channel([Toxic(name: "l", stream: .upstream, kind: .limitData(bytes: 4))])
        try channel.writeInbound(ByteBuffer(string: "abcdef"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "abcd"))
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }

    @Test func aToxicAddedLaterBeginsThenAndARemovedOneStops() throws {
        let (channel, handler) = try self.channel([])
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        let timeout = Toxic(name: "t", stream: .upstream, kind: .timeout(timeout: 300))
        handler.update([timeout])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(299))
        #expect(channel.isActive)
        handler.update([])  // removed before its time: the connection stays
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(channel.isActive)
        // Added again and left: it closes the connection its time after it began.
        handler.update([timeout])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(299))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func anUpdatedLimitKeepsCountingWhatHasPassed() throws {
        let (channel, handler) = try self.channel([Toxic(name: "l", stream: .downstream, kind: .limitData(bytes: 10))])
        try channel.writeOutbound(ByteBuffer(string: "012345"))
        handler.update([Toxic(name: "l", stream: .downstream, kind: .limitData(bytes: 8))])
        try channel.writeOutbound(ByteBuffer(string: "6789"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "012345"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "67"))
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }

    @Test func toxicityPicksTheSameConnectionsForTheSameSeed() throws {
        let toxic = Toxic(name: "r", stream: .downstream, toxicity: 0.5, kind: .limitData(bytes: 0))
        func cut(seed: UInt64) throws -> [Bool] {
            try (1...40).map { index in
                let (channel, _) = try self.channel([toxic], seed: seed, index: UInt64(index))
                try channel.writeOutbound(ByteBuffer(string: "x"))
                channel.embeddedEventLoop.run()
                defer { _ = try? channel.finish() }
                return !channel.isActive
            }
        }
        let first = try cut(seed: 7)
        #expect(try cut(seed: 7) == first)
        // About half of 40 (binomial: 10 to 30 holds for any fair draw but 1 in 800).
        #expect((10...30).contains(first.filter { $0 }.count), "\(first)")
    }

    @Test func slicerPassesDataInPiecesItsDelayApartAndInOrder() throws {
        // Toxiproxy's slicing: 10 bytes halved until no piece is over 3: 2, 3, 2, 3; a pause after each.
        let slicer = Toxic(name: "s", stream: .downstream, kind: .slicer(averageSize: 3, sizeVariation: 0, delay: 100))
        let (channel, _) = try self.channel([slicer])
        let written = channel.writeAndFlush(ByteBuffer(string: "0123456789"))
        channel.writeAndFlush(ByteBuffer(string: "ab"), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "01"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .microseconds(99))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .microseconds(1))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "234"))
        channel.embeddedEventLoop.advanceTime(by: .microseconds(200))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "56"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "789"))
        try written.wait()  // the write completes with its last slice
        channel.embeddedEventLoop.advanceTime(by: .microseconds(99))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)  // the pause after the last piece
        channel.embeddedEventLoop.advanceTime(by: .microseconds(1))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "ab"))
    }

    @Test func slicerUpstreamAndVariationKeepEveryByte() throws {
        let slicer = Toxic(name: "s", stream: .upstream, kind: .slicer(averageSize: 4, sizeVariation: 3, delay: 0))
        let (channel, _) = try self.channel([slicer])
        let bytes = (0..<200).map { UInt8($0) }
        try channel.writeInbound(ByteBuffer(bytes: bytes))
        var received: [UInt8] = []
        var sizes: [Int] = []
        while let buffer = try channel.readInbound(as: ByteBuffer.self) {
            received += buffer.readableBytesView
            sizes.append(buffer.readableBytes)
        }
        #expect(received == bytes)
        #expect(sizes.dropLast().allSatisfy { (1...7).contains($0) } && Set(sizes).count > 1, "\(sizes)")
    }

    @Test func slowCloseHoldsTheEndOfItsStream() throws {
        let (channel, _) = try self.channel([Toxic(name: "c", stream: .downstream, kind: .slowClose(delay: 300))])
        try channel.writeOutbound(ByteBuffer(string: "last words"))
        channel.close(promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "last words"))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(299))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func slowCloseUpstreamHoldsTheClientsHalfClose() throws {
        final class Events: ChannelInboundHandler {
            typealias InboundIn = ByteBuffer
            var inputClosed = false
            func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
                if let event = event as? ChannelEvent, event == .inputClosed { self.inputClosed = true }
            }
        }
        let (channel, _) = try self.channel([Toxic(name: "c", stream: .upstream, kind: .slowClose(delay: 50))])
        let events = Events()
        try channel.pipeline.syncOperations.addHandler(events)
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(49))
        #expect(!events.inputClosed)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(events.inputClosed)
        _ = try? channel.finish()
    }
}
