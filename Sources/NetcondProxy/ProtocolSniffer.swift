import NIOCore
import NIOHTTP1

/// Tells what a new client speaks from its first bytes and sets up the channel for it, so one port
/// serves HTTP proxy requests, CONNECT tunnels and SOCKS5.
///
/// ```
///  0x05 …        → SOCKS5 negotiation (not shaped), then a shaped tunnel
///  "CONNECT " …  → HTTP; the CONNECT exchange is not shaped, the tunnel is
///  anything else → HTTP, shaped from the first byte (the request is real traffic)
/// ```
final class ProtocolSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let shaper: LinkShaper
    private let connector: UpstreamConnector
    private var seen: ByteBuffer?
    private var deadline: Scheduled<Void>?

    /// A client that has not said what it speaks by then is let go: a port check, a connection
    /// opened and forgotten, a slow-loris that holds descriptors. Generous, as servers' header
    /// time-outs are (nginx's is 60 s), so that a preconnected client is not cut off.
    static let handshakeTimeout = TimeAmount.seconds(60)

    /// The connector carries the run's counters and rules to the handler chosen here.
    init(shaper: LinkShaper, connector: UpstreamConnector) {
        self.shaper = shaper
        self.connector = connector
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.deadline = context.eventLoop.assumeIsolated().scheduleTask(in: Self.handshakeTimeout) {
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.deadline?.cancel()
        self.deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = self.unwrapInboundIn(data)
        if self.seen == nil {
            self.seen = incoming
        } else {
            self.seen!.writeBuffer(&incoming)
        }
        guard let seen = self.seen, let first = seen.getInteger(at: seen.readerIndex, as: UInt8.self) else { return }
        do {
            switch first {
            case 0x05:
                try self.become(
                    SOCKS5Handler(shaper: self.shaper, connector: self.connector), shaped: false, context: context)
            case 0x04:
                // SOCKS4: "request rejected".
                context.writeAndFlush(
                    self.wrapInboundOut(context.channel.allocator.buffer(bytes: [0, 0x5B, 0, 0, 0, 0, 0, 0]))
                )
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            default:
                let prefix = Array("CONNECT ".utf8)
                let available = seen.getBytes(at: seen.readerIndex, length: min(seen.readableBytes, prefix.count)) ?? []
                if available.count < prefix.count && Array(prefix.prefix(available.count)) == available {
                    return  // could still be CONNECT: wait for more
                }
                let isConnect = available == prefix
                try context.pipeline.syncOperations.configureHTTPServerPipeline(
                    position: .after(self),
                    withPipeliningAssistance: false,
                    withErrorHandling: false  // HTTPProxyHandler answers a malformed request itself
                )
                let handler = HTTPProxyHandler(shaper: self.shaper, connector: self.connector)
                try context.pipeline.syncOperations.addHandler(handler)
                try self.finish(shaped: !isConnect, context: context)
            }
        } catch {
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The client is gone before it said what it speaks (a port check, a health probe, a
            // greeting cut short): there is nothing to answer and nothing to relay.
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func become(_ handler: ChannelHandler, shaped: Bool, context: ChannelHandlerContext) throws {
        try context.pipeline.syncOperations.addHandler(handler, position: .after(self))
        try self.finish(shaped: shaped, context: context)
    }

    private func finish(shaped: Bool, context: ChannelHandlerContext) throws {
        guard let seen = self.seen else { return }
        self.seen = nil
        if shaped {
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            self.shaper.beginShaping()
            self.shaper.inject(seen)
        } else {
            context.fireChannelRead(self.wrapInboundOut(seen))
            context.fireChannelReadComplete()
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }
}

extension ChannelPipeline.SynchronousOperations {
    /// NIO's `configureHTTPServerPipeline` at a chosen position.
    func configureHTTPServerPipeline(
        position: ChannelPipeline.SynchronousOperations.Position,
        withPipeliningAssistance: Bool,
        withErrorHandling: Bool
    ) throws {
        let responseEncoder = HTTPResponseEncoder()
        let requestDecoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes))
        var handlers: [RemovableChannelHandler] = [responseEncoder, requestDecoder]
        if withErrorHandling { handlers.append(HTTPServerProtocolErrorHandler()) }
        switch position {
        case .after(let handler):
            var anchor: ChannelHandler = handler
            for next in handlers {
                try self.addHandler(next, position: .after(anchor))
                anchor = next
            }
        default:
            try self.addHandlers(handlers, position: position)
        }
    }
}
