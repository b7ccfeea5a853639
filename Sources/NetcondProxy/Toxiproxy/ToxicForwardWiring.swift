import NIOCore
import NetcondCore

/// A Toxiproxy connection inside a netcond forward (`--netcond-link`): the forward's link carries
/// latency, rate and a `timeout`'s stall; the toxics here act on each connection on its own.
/// Upstream bytes go on up the pipeline; the link's writes come down through the downstream
/// toxics; an end of stream is passed on as the forward passes it (a half-close stays a
/// half-close, a close the forward asks for waits for the downstream stream to end).
final class ToxicForwardWiring: ToxicWiring {
    let streams: ToxicStreams
    private var context: ChannelHandlerContext?
    private var downstream = Downstream.open
    private var clientEnded = false

    /// The downstream stream's end.
    private enum Downstream {
        case open
        /// The forward asked for a close: done when the stream has ended behind what it holds.
        case closing(CloseMode, EventLoopPromise<Void>?)
        /// The end has reached the client; a later close goes straight on.
        case ended
    }

    init(streams: ToxicStreams) {
        self.streams = streams
    }

    func added(context: ChannelHandlerContext) {
        self.context = context
        self.streams.open(
            on: context.eventLoop, onLink: true, up: { [weak self] in self?.deliverUpstream($0) },
            down: { [weak self] in self?.deliverDownstream($0) })
    }

    func removed(context: ChannelHandlerContext) {
        self.streams.down?.stop()
        self.streams.up?.stop()
        self.failClosing()
        self.context = nil
    }

    func clientRead(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        self.streams.up?.push(.data(buffer, stamp: context.eventLoop.now, promise: nil))
    }

    func clientReadComplete(context: ChannelHandlerContext) {}

    func clientInputClosed(context: ChannelHandlerContext) {
        self.streams.up?.push(.end(.eof))
    }

    func clientInactive(context: ChannelHandlerContext) {
        self.clientEnded = true
        self.streams.up?.stop()
        self.streams.down?.stop()
        self.failClosing()
    }

    func clientError(_ error: Error, context: ChannelHandlerContext) {
        context.fireErrorCaught(error)
    }

    func clientWritabilityChanged(context: ChannelHandlerContext) {}

    /// The end of the downstream stream (the server closed, or the proxy closes).
    func close(mode: CloseMode, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        guard let down = self.streams.down, !self.clientEnded else {
            return context.close(mode: mode, promise: promise)
        }
        switch self.downstream {
        case .ended:
            context.close(mode: mode, promise: promise)
        case .closing(_, let pending):
            // Already ending: this close joins it (a full close overrides a half one).
            if mode == .all { self.downstream = .closing(.all, pending) }
            if let promise { pending?.futureResult.cascade(to: promise) ?? promise.succeed() }
        case .open:
            self.downstream = .closing(mode, promise)
            down.push(.end(mode == .output ? .eof : .close))
        }
    }

    private func failClosing() {
        if case .closing(_, let promise) = self.downstream {
            promise?.fail(ChannelError.ioOnClosedChannel)
            self.downstream = .open
        }
    }

    private func deliverDownstream(_ item: ToxicChain.Item) {
        guard let context, !self.clientEnded else {
            item.promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch item {
        case .data(let buffer, _, let promise):
            self.streams.tally.sent(.downstream, buffer.readableBytes)
            context.writeAndFlush(NIOAny(buffer), promise: promise)
        case .end(let ending):
            let closing = self.downstream
            self.downstream = .ended
            switch (ending, closing) {
            case (.reset, _):
                if case .closing(_, let promise) = closing { promise?.fail(ChannelError.ioOnClosedChannel) }
                context.endClient(reset: true)
            case (.eof, .closing(let mode, let promise)):
                context.close(mode: mode, promise: promise)
            case (_, .closing(_, let promise)):
                context.flush()
                context.close(mode: .all, promise: promise)
            default:
                context.flush()
                context.close(mode: .all, promise: nil)
            }
        }
    }

    private func deliverUpstream(_ item: ToxicChain.Item) {
        guard let context, !self.clientEnded else { return }
        switch item {
        case .data(let buffer, _, _):
            self.streams.tally.sent(.upstream, buffer.readableBytes)
            context.fireChannelRead(NIOAny(buffer))
            context.fireChannelReadComplete()
        case .end(.eof): context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        case .end(.close): context.endClient(reset: false)
        case .end(.reset): context.endClient(reset: true)
        }
    }
}
