import NIOCore
import NetcondCore

/// One connection of a Toxiproxy proxy and its two streams through their toxics (``ToxicChain``):
/// upstream (client to server) and downstream (server to client). It sits first in the client's
/// pipeline, so it sees the bytes as the client sent them and hands the client what the toxics let
/// through.
///
/// Two wirings:
/// - **relay** (`netcond toxiproxy`, as Toxiproxy): the handler writes the upstream channel
///   itself (``ToxicUpstreamSide`` brings the server's bytes back), and a stream's end closes the
///   whole connection as Toxiproxy's does: the side written to is closed (after what was written
///   to it), and the other side once its own stream has handed on what it held. A half-close is
///   not passed on, as in Toxiproxy.
/// - **forward** (`--netcond-link`): the handler sits in a netcond forward, whose link carries
///   latency, rate and a `timeout`'s stall; upstream bytes go on up the pipeline, and an end of
///   stream is passed on as the forward passes it (a half-close stays a half-close).
///
/// ```
///   client ⇄ [ToxicConnectionHandler: upstream chain ▶ / ◀ downstream chain] ⇄ server (relay)
///                                                                            ⇄ link ⇄ server (forward)
/// ```
final class ToxicConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Wiring {
        case relay
        case forward
    }

    private let wiring: Wiring
    private let seed: UInt64
    private var context: ChannelHandlerContext?
    private var up: ToxicChain?
    private var down: ToxicChain?
    private var toxics: [Toxic] = []
    /// A `reset_peer` toxic was in force when the connection opened: as Toxiproxy sets
    /// `SO_LINGER 0` on both sockets then, every close of this connection is a reset.
    private var lingerZero = false
    /// Relay: the server's channel, once connected.
    private var upstream: Channel?
    private var lastUpstreamWrite: EventLoopFuture<Void>?
    private var upstreamEnded = false
    private var clientEnded = false
    private var clientInputClosed = false
    /// Relay: the server's stream has ended (its end is on its way through the downstream toxics).
    private var downstreamEnding = false
    /// Relay: what the client sent (and its end) before the upstream connection was made, passed
    /// on once it is (a client that writes and shuts down at once loses nothing).
    private var early: [ToxicChain.Item] = []
    /// Forward: the close the forward asked for, done when the downstream stream has ended.
    private var pendingClose: (mode: CloseMode, promise: EventLoopPromise<Void>?)?
    /// Forward: the downstream stream's end has reached the client; a later close goes straight on.
    private var downstreamEnded = false

    init(seed: UInt64, wiring: Wiring) {
        self.seed = seed
        self.wiring = wiring
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loop = context.eventLoop
        let onLink = self.wiring == .forward
        self.up = ToxicChain(stream: .upstream, seed: self.seed, eventLoop: loop, onLink: onLink) { [weak self] item in
            self?.deliverUpstream(item)
        }
        self.down = ToxicChain(stream: .downstream, seed: self.seed, eventLoop: loop, onLink: onLink) { [weak self] item in
            self?.deliverDownstream(item)
        }
        self.up?.onRoom = { [weak self] in self?.readClientIfRoom() }
        self.down?.onRoom = { [weak self] in self?.readUpstreamIfRoom() }
        self.up?.setToxics(self.toxics)
        self.down?.setToxics(self.toxics)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.down?.stop()
        // Relay: the upstream stream goes on without the client's channel (what it holds, then
        // the server's close); it stops when the server's side is done.
        if self.wiring == .forward || self.upstream == nil || self.upstreamEnded { self.up?.stop() }
        self.pendingClose?.promise?.fail(ChannelError.ioOnClosedChannel)
        self.pendingClose = nil
        self.context = nil
    }

    /// The proxy's toxics now, in the order they were added.
    func update(_ toxics: [Toxic], opening: Bool = false) {
        if opening, toxics.contains(where: { if case .resetPeer = $0.kind { return true } else { return false } }) {
            self.lingerZero = true
        }
        self.toxics = toxics
        self.up?.setToxics(toxics)
        self.down?.setToxics(toxics)
    }

    // MARK: - The client's side

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.pushUp(.data(self.unwrapInboundIn(data), stamp: context.eventLoop.now, promise: nil))
    }

    private func pushUp(_ item: ToxicChain.Item) {
        if self.wiring == .relay && self.upstream == nil {
            self.early.append(item)
        } else {
            self.up?.push(item)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.wiring == .relay { self.readClientIfRoom() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            return context.fireUserInboundEventTriggered(event)
        }
        self.clientInputClosed = true
        self.pushUp(.end(.eof))
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.clientEnded = true
        if self.wiring == .relay {
            // Toxiproxy's read of the client fails: the upstream stream ends behind its data.
            self.pushUp(.end(.close))
            self.down?.stop()
            self.finishIfDone()
        } else {
            self.up?.stop()
            self.down?.stop()
            self.pendingClose?.promise?.fail(ChannelError.ioOnClosedChannel)
            self.pendingClose = nil
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard self.wiring == .relay else { return context.fireErrorCaught(error) }
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if self.wiring == .relay { self.readUpstreamIfRoom() }
        context.fireChannelWritabilityChanged()
    }

    /// Forward: the link's delivery to the client goes through the downstream toxics.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.down?.push(.data(self.unwrapOutboundIn(data), stamp: context.eventLoop.now, promise: promise))
    }

    func flush(context: ChannelHandlerContext) {
        // Each chunk is flushed as it leaves the chain.
    }

    /// Forward: the end of the downstream stream (the server closed, or the proxy closes).
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard self.wiring == .forward, let down = self.down, !self.clientEnded, !self.downstreamEnded else {
            return context.close(mode: mode, promise: promise)
        }
        if let pending = self.pendingClose {
            // Already ending: this close joins it (a full close overrides a half one).
            if mode == .all { self.pendingClose = (.all, pending.promise) }
            if let promise { pending.promise?.futureResult.cascade(to: promise) ?? promise.succeed() }
            return
        }
        self.pendingClose = (mode, promise)
        down.push(.end(mode == .output ? .eof : .close))
    }

    // MARK: - Where the streams go

    private func deliverDownstream(_ item: ToxicChain.Item) {
        guard let context, !self.clientEnded else {
            if case .data(_, _, let promise) = item { promise?.fail(ChannelError.ioOnClosedChannel) }
            return
        }
        switch item {
        case .data(let buffer, _, let promise):
            context.writeAndFlush(self.wrapOutboundOut(buffer), promise: promise)
        case .end(let ending):
            switch self.wiring {
            case .relay:
                // Toxiproxy's close is a reset only through SO_LINGER 0 (see `lingerZero`): a
                // reset_peer added to an open connection ends it with a FIN there, and so here.
                self.endClient(reset: self.lingerZero)
            case .forward:
                self.downstreamEnded = true
                let pending = self.pendingClose
                self.pendingClose = nil
                if ending == .reset {
                    pending?.promise?.fail(ChannelError.ioOnClosedChannel)
                    self.endClient(reset: true)
                } else if let pending, ending == .eof {
                    context.close(mode: pending.mode, promise: pending.promise)
                } else {
                    context.flush()
                    context.close(mode: .all, promise: pending?.promise)
                }
            }
        }
    }

    private func deliverUpstream(_ item: ToxicChain.Item) {
        switch (self.wiring, item) {
        case (.forward, .data(let buffer, _, _)):
            guard let context, !self.clientEnded else { return }
            context.fireChannelRead(self.wrapInboundOut(buffer))
            context.fireChannelReadComplete()
        case (.forward, .end(let ending)):
            guard let context, !self.clientEnded else { return }
            switch ending {
            case .eof: context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            case .close: self.endClient(reset: false)
            case .reset: self.endClient(reset: true)
            }
        case (.relay, .data(let buffer, _, _)):
            guard let upstream, !self.upstreamEnded else { return }
            self.lastUpstreamWrite = upstream.writeAndFlush(buffer)
        case (.relay, .end):
            // Toxiproxy closes the server's socket once what was written to it has gone.
            guard let upstream, !self.upstreamEnded else { return }
            self.upstreamEnded = true
            let reset = self.lingerZero
            let written = self.lastUpstreamWrite ?? upstream.eventLoop.makeSucceededVoidFuture()
            written.whenComplete { _ in
                if reset { upstream.resetConnection() } else { upstream.close(promise: nil) }
            }
        }
    }

    private func endClient(reset: Bool) {
        guard let context, !self.clientEnded else { return }
        if reset {
            context.channel.resetConnection()
        } else {
            context.flush()
            context.close(promise: nil)
        }
    }

    // MARK: - Relay: the server's side

    /// The server's channel is connected: the handler starts reading both sides. Its close, however
    /// it comes (the server's, a toxic's, the proxy's), ends the downstream stream: learnt from its
    /// close future, not from `channelInactive`, which NIO does not fire for a channel closed before
    /// its activation was over, as one closed from its connect's completion is (a client that sent
    /// only its end before the connection was made: its end closes the server's side at once).
    func attachUpstream(_ channel: Channel) {
        self.upstream = channel
        channel.closeFuture.assumeIsolated().whenComplete { [weak self] _ in self?.upstreamEnd(inactive: true) }
        let early = self.early
        self.early = []
        for item in early { self.up?.push(item) }
        self.readClientIfRoom()
        self.readUpstreamIfRoom()
    }

    func upstreamRead(_ buffer: ByteBuffer) {
        guard let context else { return }
        self.down?.push(.data(buffer, stamp: context.eventLoop.now, promise: nil))
    }

    func upstreamReadComplete() {
        self.readUpstreamIfRoom()
    }

    /// The server's stream ended (its EOF), or its channel closed (`inactive`): either way, as in
    /// Toxiproxy, the downstream stream ends behind what it holds.
    func upstreamEnd(inactive: Bool) {
        if inactive {
            self.upstreamEnded = true
            self.up?.stop()
        }
        if !self.downstreamEnding {
            self.downstreamEnding = true
            self.down?.push(.end(.close))
        }
        self.finishIfDone()
    }

    func upstreamWritabilityChanged() {
        self.readClientIfRoom()
    }

    private func readClientIfRoom() {
        guard self.wiring == .relay, let context, let upstream, !self.clientEnded, !self.clientInputClosed,
            upstream.isWritable, (self.up?.heldBytes ?? 0) <= ToxicChain.readLimit
        else { return }
        context.read()
    }

    private func readUpstreamIfRoom() {
        guard self.wiring == .relay, let context, let upstream, !self.upstreamEnded, context.channel.isWritable,
            (self.down?.heldBytes ?? 0) <= ToxicChain.readLimit
        else { return }
        upstream.read()
    }

    private func finishIfDone() {
        guard self.clientEnded, self.upstreamEnded else { return }
        self.up?.stop()
        self.down?.stop()
    }
}

/// The server's side of a relayed Toxiproxy connection: hands what the server sends, and its end
/// of stream, to the client's ``ToxicConnectionHandler`` (which learns of the channel's close from
/// its close future).
final class ToxicUpstreamSide: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let connection: ToxicConnectionHandler

    init(connection: ToxicConnectionHandler) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.connection.upstreamRead(self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.connection.upstreamReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            self.connection.upstreamEnd(inactive: false)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.connection.upstreamWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
