import NIOCore

/// Joins two channels into one byte pipe: what one reads, the other writes.
///
/// One of a matched pair (one in the client channel, one in the upstream channel). It reads only
/// while its partner can take more (the partner channel is writable and, for a client channel, the
/// emulated link accepts more), and it forwards half-close (EOF → close output) and close. A client
/// channel is closed with `CloseWhenDrained` so bytes still on the emulated link reach the client.
final class GlueHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var linkWritable = true
    /// True for the client side, whose `LinkShaper` understands `CloseWhenDrained`.
    private let isClientSide: Bool

    private init(isClientSide: Bool) {
        self.isClientSide = isClientSide
    }

    static func matchedPair() -> (client: GlueHandler, upstream: GlueHandler) {
        let client = GlueHandler(isClientSide: true)
        let upstream = GlueHandler(isClientSide: false)
        client.partner = upstream
        upstream.partner = client
        return (client, upstream)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.partner = nil
    }

    // MARK: Called by the partner

    private func partnerWrite(_ data: NIOAny) {
        self.context?.write(data, promise: nil)
    }

    private func partnerFlush() {
        self.context?.flush()
    }

    private func partnerWriteEOF() {
        self.context?.close(mode: .output, promise: nil)
    }

    /// The partner's connection ended (`reset`: its peer reset it): this one ends the same way. On
    /// the client side the close crosses the emulated link behind the bytes before it.
    private func partnerCloseFull(reset: Bool = false) {
        guard let context = self.context else { return }
        if self.isClientSide {
            context.triggerUserOutboundEvent(CloseWhenDrained(reset: reset, crossesLink: true), promise: nil)
        } else if reset {
            context.channel.resetConnection()
        } else {
            // The client's bytes still in this channel's buffer (the server reading slowly) go
            // first, as the client's kernel would send them before its FIN.
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(self.wrapOutboundOut(ByteBuffer()), promise: written)
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    private func partnerBecameWritable() {
        if self.pendingRead {
            self.pendingRead = false
            self.context?.read()
        }
    }

    private var partnerWritable: Bool {
        guard let context = self.context else { return false }
        return context.channel.isWritable && self.linkWritable
    }

    // MARK: Channel events

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.partner?.partnerWrite(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.partner?.partnerFlush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.partner?.partnerCloseFull()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            self.partner?.partnerWriteEOF()
        } else if let event = event as? LinkWritabilityChanged {
            self.linkWritable = event.isWritable
            if self.partnerWritable { self.partner?.partnerBecameWritable() }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.partner?.partnerCloseFull(reset: HTTPProxyHandler.isReset(error))
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if self.partnerWritable { self.partner?.partnerBecameWritable() }
    }

    func read(context: ChannelHandlerContext) {
        if let partner = self.partner, partner.partnerWritable {
            context.read()
        } else {
            self.pendingRead = true
        }
    }
}
