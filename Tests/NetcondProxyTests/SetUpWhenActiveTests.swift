import NIOCore
import NIOEmbedded
import Testing

@testable import NetcondProxy

/// An accepted connection is set up at `channelActive`, never before; the handlers the set-up adds
/// see the event, and a set-up that throws closes the connection.
@Suite struct SetUpWhenActiveTests {
    /// Counts the `channelActive` events that reach it.
    final class ActiveCounter: ChannelInboundHandler {
        typealias InboundIn = NIOAny
        var seen = 0

        func channelActive(context: ChannelHandlerContext) {
            self.seen += 1
            context.fireChannelActive()
        }
    }

    struct Refused: Error {}

    @Test func setsUpOnceActiveThenLeavesThePipeline() throws {
        let channel = EmbeddedChannel()
        let counter = ActiveCounter()
        var setUps = 0
        try channel.pipeline.syncOperations.addHandler(
            SetUpWhenActive { channel in
                setUps += 1
                try channel.pipeline.syncOperations.addHandler(counter)
            })
        #expect(setUps == 0)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        #expect(setUps == 1)
        #expect(counter.seen == 1)
        #expect(throws: (any Error).self) { try channel.pipeline.syncOperations.handler(type: SetUpWhenActive.self) }
        #expect(try channel.finish().isClean)
    }

    @Test func aSetUpThatThrowsClosesTheConnection() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(SetUpWhenActive { _ in throw Refused() })
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        #expect(!channel.isActive)
    }
}
