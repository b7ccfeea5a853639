import NIOCore
import NetcondCore

/// One connection of a Toxiproxy proxy and its two streams through their toxics (``ToxicChain``):
/// upstream (client to server) and downstream (server to client). It sits first in the client's
/// pipeline, so it sees the bytes as the client sent them and hands the client what the toxics let
/// through. A thin shell: what the connection does with its streams is its wiring's.
///
/// Two wirings, two types:
/// - ``ToxicRelayWiring`` (`netcond toxiproxy`, as Toxiproxy): writes the upstream channel itself
///   and ends the whole connection when a stream ends, as Toxiproxy does.
/// - ``ToxicForwardWiring`` (`--netcond-link`): sits in a netcond forward, whose link carries
///   latency, rate and a `timeout`'s stall; a half-close stays a half-close.
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

    let wiring: any ToxicWiring

    init(wiring: any ToxicWiring) {
        self.wiring = wiring
    }

    convenience init(seed: UInt64, wiring: Wiring) {
        let streams = ToxicStreams(seed: seed)
        switch wiring {
        case .relay: self.init(wiring: ToxicRelayWiring(streams: streams))
        case .forward: self.init(wiring: ToxicForwardWiring(streams: streams))
        }
    }

    /// The proxy's toxics now, in the order they were added.
    func update(_ toxics: [Toxic], opening: Bool = false) {
        self.wiring.streams.update(toxics, opening: opening)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.wiring.added(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.wiring.removed(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.wiring.streams.tally.received(.upstream, buffer.readableBytes)
        self.wiring.clientRead(buffer, context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.wiring.clientReadComplete(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            return context.fireUserInboundEventTriggered(event)
        }
        self.wiring.clientInputClosed(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.wiring.clientInactive(context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.wiring.clientError(error, context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.wiring.clientWritabilityChanged(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// Forward: the link's delivery to the client goes through the downstream toxics.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = self.unwrapOutboundIn(data)
        self.wiring.streams.tally.received(.downstream, buffer.readableBytes)
        self.wiring.streams.down?.push(.data(buffer, stamp: context.eventLoop.now, promise: promise))
    }

    func flush(context: ChannelHandlerContext) {
        // Each chunk is flushed as it leaves the chain.
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        self.wiring.close(mode: mode, promise: promise, context: context)
    }
}

/// What a connection does with its two streams: where each goes and how their ends travel. Each
/// method is one event of the client's channel, which ``ToxicConnectionHandler`` passes on.
protocol ToxicWiring: AnyObject {
    var streams: ToxicStreams { get }
    func added(context: ChannelHandlerContext)
    func removed(context: ChannelHandlerContext)
    func clientRead(_ buffer: ByteBuffer, context: ChannelHandlerContext)
    func clientReadComplete(context: ChannelHandlerContext)
    func clientInputClosed(context: ChannelHandlerContext)
    func clientInactive(context: ChannelHandlerContext)
    func clientError(_ error: Error, context: ChannelHandlerContext)
    func clientWritabilityChanged(context: ChannelHandlerContext)
    func close(mode: CloseMode, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext)
}

/// The two streams of one connection through their toxics, and the toxics in force.
final class ToxicStreams {
    let seed: UInt64
    private(set) var toxics: [Toxic] = []
    /// A `reset_peer` toxic was in force when the connection opened: as Toxiproxy sets
    /// `SO_LINGER 0` on both sockets then, every close of this connection is a reset.
    private(set) var lingerZero = false
    private(set) var up: ToxicChain?
    private(set) var down: ToxicChain?
    /// Where the connection counts its bytes (its proxy's totals; a lone one's own).
    let tally: ToxicTally

    init(seed: UInt64, tally: ToxicTally = ToxicTally()) {
        self.seed = seed
        self.tally = tally
    }

    func update(_ toxics: [Toxic], opening: Bool = false) {
        if opening, toxics.contains(where: { if case .resetPeer = $0.kind { return true } else { return false } }) {
            self.lingerZero = true
        }
        self.toxics = toxics
        self.up?.setToxics(toxics)
        self.down?.setToxics(toxics)
    }

    /// The chains start on `loop`, delivering to `up` and `down`.
    func open(
        on loop: EventLoop, onLink: Bool, up: @escaping (ToxicChain.Item) -> Void,
        down: @escaping (ToxicChain.Item) -> Void
    ) {
        let upChain = ToxicChain(stream: .upstream, seed: self.seed, eventLoop: loop, onLink: onLink, deliver: up)
        let downChain = ToxicChain(stream: .downstream, seed: self.seed, eventLoop: loop, onLink: onLink, deliver: down)
        self.up = upChain
        self.down = downChain
        upChain.setToxics(self.toxics)
        downChain.setToxics(self.toxics)
    }
}

extension ChannelHandlerContext {
    /// The client's side ends: a reset, or a close after what was written to it.
    func endClient(reset: Bool) {
        if reset {
            self.channel.resetConnection()
        } else {
            self.flush()
            self.close(promise: nil)
        }
    }
}
