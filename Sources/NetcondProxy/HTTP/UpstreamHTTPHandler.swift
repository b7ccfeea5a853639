import NIOCore
import NIOHTTP1

/// The upstream end of an HTTP proxy exchange: hands response parts to the client's handler and
/// reads only while the client (and its emulated link) can take more.
final class UpstreamHTTPHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private weak var owner: HTTPProxyHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var closedReported = false

    init(owner: HTTPProxyHandler) {
        self.owner = owner
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// The client's handler has closed this connection: nothing it does from now on is reported.
    func detach() {
        self.owner = nil
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.owner?.upstreamResponse(self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.owner?.upstreamFlush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.reportClosed(error: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.reportClosed(error: error)
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // EOF-delimited bodies end here; the decoder has already emitted `.end` for them.
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.owner?.upstreamWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if self.owner?.clientWritable ?? true {
            context.read()
        } else {
            self.pendingRead = true
        }
    }

    func resumeReading() {
        if self.pendingRead, let context = self.context {
            self.pendingRead = false
            context.read()
        }
    }

    private func reportClosed(error: Error?) {
        guard !self.closedReported else { return }
        self.closedReported = true
        self.owner?.upstreamClosed(error: error)
    }
}
