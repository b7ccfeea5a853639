import NIOCore
import NIOPosix

/// Sets up an accepted connection once it is active, not in the bootstrap's child initializer.
///
/// A listener accepts on a loop beside its connections' own (``ServerBootstrap/acceptLoop(besides:)``),
/// and NIO then runs the child initializer on the connection's loop *before* it registers the
/// connection there (a hop to the accepting loop and back lies between): whatever the set-up
/// starts, an upstream connect above all, can finish while the client's channel is not yet active,
/// and a read asked for then is lost. Set up at `channelActive`, the connection is registered and
/// open. A connection whose listener was closed meanwhile (the proxy stopped or disabled) is closed
/// instead of set up.
///
/// ```
///  accepted ─▶ [SetUpWhenActive] ──channelActive──▶ set-up adds the connection's handlers,
///                                                    then the event goes on to them; this leaves
/// ```
final class SetUpWhenActive: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private var setUp: ((Channel) throws -> Void)?

    init(_ setUp: @escaping (Channel) throws -> Void) {
        self.setUp = setUp
    }

    func channelActive(context: ChannelHandlerContext) {
        guard let setUp = self.setUp else { return context.fireChannelActive() }
        self.setUp = nil
        let channel = context.channel
        if let listener = channel.parent, !listener.isActive {
            channel.close(promise: nil)
            return
        }
        do {
            try setUp(channel)
        } catch {
            channel.close(promise: nil)
            return
        }
        context.fireChannelActive()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

extension ServerBootstrap {
    /// Each accepted connection is set up by `setUp` once it is active, on its own loop (see
    /// ``SetUpWhenActive``); a set-up that throws closes it.
    func childChannelSetUp(_ setUp: @escaping @Sendable (Channel) throws -> Void) -> ServerBootstrap {
        self.childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(SetUpWhenActive(setUp))
            }
        }
    }
}
