import NIOCore
import NetcondCore

/// A Toxiproxy connection relayed as Toxiproxy relays it (`netcond toxiproxy`): the wiring writes
/// the upstream channel itself (``ToxicUpstreamSide`` brings the server's bytes back), and a
/// stream's end closes the whole connection as Toxiproxy's does: the side written to is closed
/// (after what was written to it), and the other side once its own stream has handed on what it
/// held. A half-close is not passed on, as in Toxiproxy. Each side is read only while the chain
/// toward the other holds little and the other can take it.
final class ToxicRelayWiring: ToxicWiring {
    let streams: ToxicStreams
    private var context: ChannelHandlerContext?
    private var upstream = Upstream.connecting(early: [])
    private var client = Client.reading
    /// The server's stream has ended (its end is on its way through the downstream toxics).
    private var serverEnding = false

    private enum Upstream {
        /// Not connected yet: what the client sent (and its end) meanwhile, passed on once it is
        /// (a client that writes and shuts down at once loses nothing).
        case connecting(early: [ToxicChain.Item])
        case open(Channel, lastWrite: EventLoopFuture<Void>?)
        /// Closed (by the upstream stream's end) or gone.
        case ended(Channel)

        var channel: Channel? {
            switch self {
            case .connecting: return nil
            case .open(let channel, _), .ended(let channel): return channel
            }
        }
    }

    private enum Client {
        case reading
        /// The client's end of stream came: nothing more to read.
        case inputClosed
        /// The client's channel is gone.
        case ended
    }

    init(streams: ToxicStreams) {
        self.streams = streams
    }

    func added(context: ChannelHandlerContext) {
        self.context = context
        self.streams.open(
            on: context.eventLoop, onLink: false, up: { [weak self] in self?.deliverUpstream($0) },
            down: { [weak self] in self?.deliverDownstream($0) })
        self.streams.up?.onRoom = { [weak self] in self?.readClientIfRoom() }
        self.streams.down?.onRoom = { [weak self] in self?.readUpstreamIfRoom() }
    }

    func removed(context: ChannelHandlerContext) {
        self.streams.down?.stop()
        // The upstream stream goes on without the client's channel (what it holds, then the
        // server's close); it stops when the server's side is done.
        if case .open = self.upstream {} else { self.streams.up?.stop() }
        self.context = nil
    }

    // MARK: - The client's side

    func clientRead(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        self.pushUp(.data(buffer, stamp: context.eventLoop.now, promise: nil))
    }

    private func pushUp(_ item: ToxicChain.Item) {
        if case .connecting(var early) = self.upstream {
            early.append(item)
            self.upstream = .connecting(early: early)
        } else {
            self.streams.up?.push(item)
        }
    }

    func clientReadComplete(context: ChannelHandlerContext) {
        self.readClientIfRoom()
    }

    func clientInputClosed(context: ChannelHandlerContext) {
        if self.client == .reading { self.client = .inputClosed }
        self.pushUp(.end(.eof))
    }

    func clientInactive(context: ChannelHandlerContext) {
        self.client = .ended
        // Toxiproxy's read of the client fails: the upstream stream ends behind its data.
        self.pushUp(.end(.close))
        self.streams.down?.stop()
        self.finishIfDone()
    }

    func clientError(_ error: Error, context: ChannelHandlerContext) {
        context.close(promise: nil)
    }

    func clientWritabilityChanged(context: ChannelHandlerContext) {
        self.readUpstreamIfRoom()
    }

    func close(mode: CloseMode, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        context.close(mode: mode, promise: promise)
    }

    // MARK: - Where the streams go

    private func deliverDownstream(_ item: ToxicChain.Item) {
        guard let context, self.client != .ended else {
            item.promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch item {
        case .data(let buffer, _, let promise):
            self.streams.tally.sent(.downstream, buffer.readableBytes)
            context.writeAndFlush(NIOAny(buffer), promise: promise)
        case .end:
            // Toxiproxy's close is a reset only through SO_LINGER 0 (see `lingerZero`): a
            // reset_peer added to an open connection ends it with a FIN there, and so here.
            context.endClient(reset: self.streams.lingerZero)
        }
    }

    private func deliverUpstream(_ item: ToxicChain.Item) {
        guard case .open(let upstream, let lastWrite) = self.upstream else { return }
        switch item {
        case .data(let buffer, _, _):
            self.streams.tally.sent(.upstream, buffer.readableBytes)
            self.upstream = .open(upstream, lastWrite: upstream.writeAndFlush(buffer))
        case .end:
            // Toxiproxy closes the server's socket once what was written to it has gone.
            self.upstream = .ended(upstream)
            let reset = self.streams.lingerZero
            let written = lastWrite ?? upstream.eventLoop.makeSucceededVoidFuture()
            written.whenComplete { _ in
                if reset { upstream.resetConnection() } else { upstream.close(promise: nil) }
            }
        }
    }

    // MARK: - The server's side

    /// The server's channel is connected: the wiring starts reading both sides. Its close, however
    /// it comes (the server's, a toxic's, the proxy's), ends the downstream stream: learnt from its
    /// close future, not from `channelInactive`, which NIO does not fire for a channel closed before
    /// its activation was over, as one closed from its connect's completion is (a client that sent
    /// only its end before the connection was made: its end closes the server's side at once).
    func attachUpstream(_ channel: Channel) {
        guard case .connecting(let early) = self.upstream else { return }
        self.upstream = .open(channel, lastWrite: nil)
        channel.closeFuture.assumeIsolated().whenComplete { [weak self] _ in self?.upstreamEnd(inactive: true) }
        for item in early { self.streams.up?.push(item) }
        self.readClientIfRoom()
        self.readUpstreamIfRoom()
    }

    func upstreamRead(_ buffer: ByteBuffer) {
        guard let context else { return }
        self.streams.tally.received(.downstream, buffer.readableBytes)
        self.streams.down?.push(.data(buffer, stamp: context.eventLoop.now, promise: nil))
    }

    func upstreamReadComplete() {
        self.readUpstreamIfRoom()
    }

    /// The server's stream ended (its EOF), or its channel closed (`inactive`): either way, as in
    /// Toxiproxy, the downstream stream ends behind what it holds.
    func upstreamEnd(inactive: Bool) {
        if inactive {
            if let channel = self.upstream.channel { self.upstream = .ended(channel) }
            self.streams.up?.stop()
        }
        if !self.serverEnding {
            self.serverEnding = true
            self.streams.down?.push(.end(.close))
        }
        self.finishIfDone()
    }

    func upstreamWritabilityChanged() {
        self.readClientIfRoom()
    }

    private func readClientIfRoom() {
        guard let context, let upstream = self.upstream.channel, self.client == .reading, upstream.isWritable,
            (self.streams.up?.heldBytes ?? 0) <= ToxicChain.readLimit
        else { return }
        context.read()
    }

    private func readUpstreamIfRoom() {
        guard let context, case .open(let upstream, _) = self.upstream, context.channel.isWritable,
            (self.streams.down?.heldBytes ?? 0) <= ToxicChain.readLimit
        else { return }
        upstream.read()
    }

    private func finishIfDone() {
        guard self.client == .ended, case .ended = self.upstream else { return }
        self.streams.up?.stop()
        self.streams.down?.stop()
    }
}

/// The server's side of a relayed Toxiproxy connection: hands what the server sends, and its end
/// of stream, to the client's ``ToxicRelayWiring`` (which learns of the channel's close from its
/// close future).
final class ToxicUpstreamSide: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let relay: ToxicRelayWiring

    init(relay: ToxicRelayWiring) {
        self.relay = relay
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.relay.upstreamRead(self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.relay.upstreamReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            self.relay.upstreamEnd(inactive: false)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.relay.upstreamWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
