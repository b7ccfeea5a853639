import NIOCore

/// Stands between a port forward's client and its glue while the upstream connection is being
/// made: it reads the client at once, so that a client that gives up (closes or resets) is
/// noticed and its attempt given up too, and keeps what the link delivered meanwhile until the
/// glue has somewhere to send it.
///
/// ```
///  client ─▶ LinkShaper ─▶ ForwardHold (reads; holds bytes; FIN/close → abandon) ─▶ GlueHandler
///                              └── release(): held bytes on, then out of the way
/// ```
final class ForwardHold: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var held: [ByteBuffer] = []
    private var heldBytes = 0
    /// Gives the attempt up if the client has left, and says whether it did: a FIN sooner than
    /// the set-up could have finished is a half-close after the client's data, which goes on.
    private let abandonIfLeft: (NIODeadline) -> Bool
    private var released = false
    private var inputClosed = false

    /// Beyond this much held, the client is not read further until the connection is made.
    static let limit = 256 * 1024

    init(abandonIfLeft: @escaping (NIODeadline) -> Bool) {
        self.abandonIfLeft = abandonIfLeft
    }

    func channelActive(context: ChannelHandlerContext) {
        context.read()
        context.fireChannelActive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.read() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.held.append(buffer)
        self.heldBytes += buffer.readableBytes
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.heldBytes < Self.limit { context.read() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            if self.abandonIfLeft(context.eventLoop.now) {
                // The client left before its connection was made: on a network it never was.
                context.close(promise: nil)
            } else {
                self.inputClosed = true  // passed on after the bytes before it
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        _ = self.abandonIfLeft(.distantFuture)
        context.fireChannelInactive()
    }

    /// The upstream is ready: what was held goes on, and this handler leaves the pipeline.
    func release(context: ChannelHandlerContext) {
        guard !self.released else { return }
        self.released = true
        for buffer in self.held { context.fireChannelRead(self.wrapInboundOut(buffer)) }
        if !self.held.isEmpty { context.fireChannelReadComplete() }
        self.held = []
        if self.inputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
