import DequeModule
import NIOCore
import NetcondCore

/// Puts the emulated link between a client and the proxy: the first handler of every client channel.
///
/// ```
///  client socket ──read──▶ [LinkShaper: up, delayed by the model] ──▶ protocol handlers ──▶ upstream
///  client socket ◀─write── [LinkShaper: down, delayed by the model] ◀── protocol handlers ◀── upstream
/// ```
/// Bytes are held here until the `LinkModel` says they arrived, then passed on unchanged and in
/// order. It starts passive (proxy-protocol bytes such as a CONNECT request or a SOCKS greeting
/// are not traffic of the emulated link) and is activated with a flow. Backpressure: the client is
/// read only while the emulated sender's socket buffer has room (`LinkModel.senderHasRoom`); while
/// the down one is full, the handler fires `LinkWritabilityChanged(false)` so the proxy stops reading the
/// upstream. Half-close and close wait until every byte before them has been delivered. While the
/// link changes nothing (`LinkModel.isTransparent`, e.g. `none` in a run that may be switched live)
/// and this connection has nothing held, bytes skip the model; once conditions change they cross
/// it again, behind anything still held.
final class LinkShaper: ChannelDuplexHandler, LinkEndpoint {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let driver: LinkDriver?
    private let stats: ProxyStats
    /// Where this connection's delivered bytes are counted (nil in handler tests).
    private let record: ClientConnectionRecord?
    private(set) var flow: FlowID?
    private var preparedFlow: FlowID?
    private var context: ChannelHandlerContext?
    /// Every decision: this handler holds the bytes and carries out what it says.
    private var state = LinkShaperState()
    private var up = PendingBytes()
    private var down = PendingBytes()
    /// Half-closes waiting for the down bytes before them.
    private var outputClosePending: [EventLoopPromise<Void>?] = []
    private var closeTimer: Scheduled<Void>?

    init(driver: LinkDriver?, stats: ProxyStats, record: ClientConnectionRecord? = nil) {
        self.driver = driver
        self.stats = stats
        self.record = record
    }

    /// Opens this connection's flow on the link (so its set-up can be emulated) without shaping yet.
    /// Nil when the run has no link model (pass-through).
    func prepareFlow() -> FlowID? {
        if let flow = self.preparedFlow { return flow }
        guard let driver = self.driver else { return nil }
        let flow = driver.open(self)
        self.preparedFlow = flow
        return flow
    }

    /// Starts shaping: from now on every byte in either direction crosses the emulated link.
    @discardableResult
    func beginShaping() -> FlowID? {
        self.flow = self.prepareFlow()
        if self.flow != nil, let driver = self.driver { self.state.beginShaping(at: driver.eventLoop.now) }
        return self.flow
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.closeTimer?.cancel()
        self.closeTimer = nil
        if let flow = self.preparedFlow { self.driver?.close(flow) }
        self.flow = nil
        self.preparedFlow = nil
        self.state.stopShaping()
        self.failHeld()
    }

    /// Whether the link changes nothing now (bytes may skip it when none of their direction is held).
    private var transparent: Bool { self.driver?.model.isTransparent ?? true }

    private func senderHasRoom(_ direction: Direction) -> Bool {
        guard let flow = self.flow, let driver = self.driver else { return true }
        return driver.model.senderHasRoom(flow, direction)
    }

    // MARK: Up: client → server

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.stats.bytesUp += Int64(buffer.readableBytes)
        self.enterUp(buffer, context: context, data: data)
    }

    /// Feeds bytes that were read before shaping began (a protocol sniffer's look-ahead) into the
    /// link as if they had just been read.
    func inject(_ buffer: ByteBuffer) {
        guard let context = self.context else { return }
        self.enterUp(buffer, context: context, data: nil)
        if self.state.readComplete() { context.fireChannelReadComplete() }
    }

    private func enterUp(_ buffer: ByteBuffer, context: ChannelHandlerContext, data: NIOAny?) {
        switch self.state.bytesRead(upHeld: !self.up.isEmpty, transparent: self.transparent) {
        case .bypass:
            context.fireChannelRead(data ?? self.wrapInboundOut(buffer))
        case .link:
            self.up.append(buffer, promise: nil)
            if let flow = self.flow { self.driver?.send(flow, .up, bytes: buffer.readableBytes) }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.state.readComplete() { context.fireChannelReadComplete() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            return context.fireUserInboundEventTriggered(event)
        }
        if let record = self.record, record.clientFINAt == nil { record.clientFINAt = context.eventLoop.now }
        // The set-up a FIN must outlast to be a client that left (see ``LinkShaperState/inputClosed``).
        let setUp = max(self.driver?.roundTrip() ?? .zero, UpstreamConnector.halfCloseGrace)
        self.perform(
            self.state.inputClosed(upHeld: !self.up.isEmpty, setUp: setUp, at: context.eventLoop.now), context: context)
    }

    func read(context: ChannelHandlerContext) {
        self.perform(self.state.read(senderHasRoom: self.senderHasRoom(.up)), context: context)
    }

    // MARK: Down: server → client

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = self.unwrapOutboundIn(data)
        self.stats.bytesDown += Int64(buffer.readableBytes)
        self.record?.downWritten += Int64(buffer.readableBytes)
        switch self.state.bytesWritten(downHeld: !self.down.isEmpty, transparent: self.transparent) {
        case .bypass:
            self.delivered(buffer.readableBytes)
            context.write(data, promise: promise)
        case .link:
            self.down.append(buffer, promise: promise)
            if let flow = self.flow { self.driver?.send(flow, .down, bytes: buffer.readableBytes) }
            self.perform(self.state.heldDown(senderHasRoom: self.senderHasRoom(.down)), context: context)
        }
    }

    func flush(context: ChannelHandlerContext) {
        if self.state.flush() { context.flush() }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .output && self.state.holdsOutputClose(downHeld: !self.down.isEmpty) {
            self.outputClosePending.append(promise)
            return
        }
        context.close(mode: mode, promise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let close = event as? CloseWhenDrained else {
            return context.triggerUserOutboundEvent(event, promise: promise)
        }
        promise?.succeed()
        // The far end's close takes the down delay in force now.
        let latency = self.driver?.delay(.down) ?? .zero
        self.perform(
            self.state.closeRequested(
                close, downLatency: latency, downHeld: !self.down.isEmpty, at: context.eventLoop.now), context: context)
    }

    // MARK: Deliveries from the link

    func deliver(_ direction: Direction, bytes: Int) {
        guard let context = self.context else { return }
        switch direction {
        case .up:
            for (slice, _) in self.up.take(bytes) {
                context.fireChannelRead(self.wrapInboundOut(slice))
            }
            context.fireChannelReadComplete()
            self.perform(self.state.deliveredUp(upHeld: !self.up.isEmpty), context: context)
        case .down:
            self.delivered(bytes)
            for (slice, promise) in self.down.take(bytes) {
                context.write(self.wrapOutboundOut(slice), promise: promise)
            }
            context.flush()
            self.perform(
                self.state.deliveredDown(downHeld: !self.down.isEmpty, at: context.eventLoop.now), context: context)
        }
    }

    /// Resumes reading the client, or lets the proxy read the upstream again, once the emulated
    /// sender's buffer has room. The driver calls it after every pump while this shaper is held
    /// back (it registered with `notifyWhenRoom`), deliveries or not.
    func roomMayHaveChanged() {
        guard let context = self.context else { return }
        self.perform(
            self.state.roomMayHaveChanged(up: self.senderHasRoom(.up), down: self.senderHasRoom(.down)),
            context: context)
    }

    // MARK: Carrying out

    private func perform(_ actions: [LinkShaperState.Action], context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .read:
                context.read()
            case .waitForRoom:
                if let flow = self.flow { self.driver?.notifyWhenRoom(flow) }
            case .stopWaitingForRoom:
                if let flow = self.flow { self.driver?.stopWaitingForRoom(flow) }
            case .linkWritable(let writable):
                context.fireUserInboundEventTriggered(LinkWritabilityChanged(isWritable: writable))
            case .fireInputClosed:
                context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            case .closeHeldOutputs:
                let promises = self.outputClosePending
                self.outputClosePending = []
                for promise in promises { context.close(mode: .output, promise: promise) }
            case .close(let reset):
                self.closeTimer?.cancel()
                self.closeTimer = nil
                if reset {
                    context.channel.resetConnection()
                } else {
                    Self.closeAfterWrites(context: context)
                }
            case .armCloseTimer(let deadline):
                self.closeTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
                    self.closeTimer = nil
                    guard let context = self.context else { return }
                    self.perform(
                        self.state.closeTimerFired(downHeld: !self.down.isEmpty, at: context.eventLoop.now),
                        context: context)
                }
            case .dropHeldUpAndClose:
                for promise in self.up.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
                context.close(promise: nil)
            }
        }
    }

    /// Closes once the bytes already written have reached the socket: a close with writes still
    /// in the channel's buffer (the client's receive window full) would throw them away, and a
    /// server's close never loses the bytes it sent before it. An empty write completes after
    /// every write before it.
    private static func closeAfterWrites(context: ChannelHandlerContext) {
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer()), promise: written)
        written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    /// Fails the promises of everything held (the connection is gone, or the link cut it).
    private func failHeld() {
        for promise in self.up.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
        for promise in self.down.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
        for promise in self.outputClosePending { promise?.fail(ChannelError.ioOnClosedChannel) }
        self.outputClosePending = []
    }
}

extension LinkShaper {
    /// The proxy's own answer (to CONNECT, to a SOCKS5 request) has been written: what follows
    /// comes from the upstream.
    func upstreamBytesFollow() {
        self.record?.originBytesFollow()
    }

    fileprivate func delivered(_ bytes: Int) {
        self.stats.bytesDelivered += Int64(bytes)
        self.record?.noteDelivered(bytes, at: self.context?.eventLoop.now ?? .now())
    }

    /// The link cut this connection: everything held is dropped (the model counted it) and the
    /// client's socket is closed with a TCP reset (SO_LINGER 0), as a middlebox's RST would, or
    /// with an orderly close at once (`close`).
    func linkCut(_ mode: CutMode) {
        guard let context = self.context else { return }
        if let record = self.record {
            record.cut = mode
            // Bytes handed to the channel but still in its write buffer (a client reading slowly)
            // never reach the client now.
            if let pending = try? context.channel.syncOptions?.getOption(.bufferedWritableBytes) {
                record.downDelivered -= Int64(pending)
            }
        }
        self.flow = nil
        self.preparedFlow = nil
        self.state.stopShaping()
        self.failHeld()
        switch mode {
        case .reset: context.channel.resetConnection()
        case .close: context.close(promise: nil)
        }
    }
}

/// Fired inbound by `LinkShaper` when the emulated link stops or starts accepting down bytes.
struct LinkWritabilityChanged {
    var isWritable: Bool
}

/// Sent outbound to a client channel: close it once every byte written before has been delivered.
struct CloseWhenDrained: Equatable {
    /// A reset (RST) instead of an orderly close (FIN).
    var reset = false
    /// The close is the far end's (the server closed or reset its connection): like a segment, it
    /// reaches the client no sooner than the link's one-way latency after it was made. A close
    /// netcond makes itself (a fault's cut) happens where the client is and does not wait.
    var crossesLink = false
}

/// Buffers held for the link, consumed in order by byte count.
struct PendingBytes {
    private var buffers = Deque<(ByteBuffer, EventLoopPromise<Void>?)>()
    private(set) var count = 0

    var isEmpty: Bool { self.buffers.isEmpty }

    mutating func append(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard buffer.readableBytes > 0 else {
            if buffers.isEmpty {
                promise?.succeed()
            } else {
                self.buffers.append((buffer, promise))
            }
            return
        }
        self.count += buffer.readableBytes
        self.buffers.append((buffer, promise))
    }

    /// Removes the first `bytes` bytes; a buffer's promise goes with its last byte.
    mutating func take(_ bytes: Int) -> [(ByteBuffer, EventLoopPromise<Void>?)] {
        var remaining = bytes
        var out: [(ByteBuffer, EventLoopPromise<Void>?)] = []
        while remaining > 0 || (self.buffers.first.map { $0.0.readableBytes == 0 } ?? false) {
            guard let (first, promise) = self.buffers.popFirst() else { break }
            var buffer = first
            if buffer.readableBytes <= remaining {
                remaining -= buffer.readableBytes
                self.count -= buffer.readableBytes
                out.append((buffer, promise))
            } else {
                let slice = buffer.readSlice(length: remaining)!
                self.count -= remaining
                remaining = 0
                out.append((slice, nil))
                self.buffers.prepend((buffer, promise))
            }
        }
        precondition(remaining == 0, "link delivered more bytes than were sent")
        return out
    }

    mutating func drainPromises() -> [EventLoopPromise<Void>?] {
        let promises = self.buffers.map { $0.1 }
        self.buffers.removeAll()
        self.count = 0
        return promises
    }
}
