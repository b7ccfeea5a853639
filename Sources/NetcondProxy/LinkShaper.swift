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
    private var context: ChannelHandlerContext?
    private var up = PendingBytes()
    private var down = PendingBytes()
    private var inputClosedPending = false
    private var outputClosePending: [EventLoopPromise<Void>?] = []
    /// A full close waiting for the bytes before it (and, when the far end made it, for the link's
    /// one-way latency): how, and not before when.
    private var pendingClose: (reset: Bool, notBefore: NIODeadline)?
    private var closeTimer: Scheduled<Void>?
    private var readPending = false
    private var linkWritable = true
    /// Bytes were passed on without the model since the last read-complete / flush.
    private var readBypassed = false
    private var writeBypassed = false

    init(driver: LinkDriver?, stats: ProxyStats, record: ClientConnectionRecord? = nil) {
        self.driver = driver
        self.stats = stats
        self.record = record
    }

    private var preparedFlow: FlowID?

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
        self.shapingSince = self.driver?.eventLoop.now
        return self.flow
    }

    /// When shaping began (the client's connection, as far as the emulated link knows).
    private var shapingSince: NIODeadline?
    /// No byte of the client's has crossed the link yet.
    private var nothingDeliveredUp = true

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
        for promise in self.up.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
        for promise in self.down.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
        for promise in self.outputClosePending { promise?.fail(ChannelError.ioOnClosedChannel) }
        self.outputClosePending = []
    }

    /// The flow and driver that new bytes go through, or nil when they skip the link: no flow or
    /// link yet, or the link is transparent and nothing of this direction is still held in it
    /// (bytes behind held ones must follow them, in order).
    private func shaping(holding: Bool) -> (FlowID, LinkDriver)? {
        guard let flow = self.flow, let driver = self.driver, !(driver.model.isTransparent && !holding) else {
            return nil
        }
        return (flow, driver)
    }

    // MARK: Up: client → server

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.stats.bytesUp += Int64(buffer.readableBytes)
        guard let (flow, driver) = self.shaping(holding: !self.up.isEmpty) else {
            self.readBypassed = true
            context.fireChannelRead(data)
            return
        }
        self.up.append(buffer, promise: nil)
        driver.send(flow, .up, bytes: buffer.readableBytes)
    }

    /// Feeds bytes that were read before shaping began (a protocol sniffer's look-ahead) into the
    /// link as if they had just been read.
    func inject(_ buffer: ByteBuffer) {
        guard let context = self.context else { return }
        guard let (flow, driver) = self.shaping(holding: !self.up.isEmpty) else {
            context.fireChannelRead(self.wrapInboundOut(buffer))
            context.fireChannelReadComplete()
            return
        }
        self.up.append(buffer, promise: nil)
        driver.send(flow, .up, bytes: buffer.readableBytes)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.flow == nil || self.readBypassed {
            self.readBypassed = false
            context.fireChannelReadComplete()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, let record = self.record, record.clientFINAt == nil {
            record.clientFINAt = context.eventLoop.now
        }
        if let event = event as? ChannelEvent, event == .inputClosed, self.flow != nil, !self.up.isEmpty {
            if self.leftBeforeArriving(now: context.eventLoop.now) {
                // The client gave up on a connection none of whose bytes has got through (a
                // blackhole, a stall): on a network its connection was never made, and nothing
                // of it reaches a server after it has gone. What it sent is dropped here.
                for promise in self.up.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
                context.close(promise: nil)
                return
            }
            self.inputClosedPending = true
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A FIN now means the client left before its connection got through: nothing it sent has
    /// crossed the link, and the handshake would have been over by now had the link let it (a
    /// FIN sooner than that, or than ``UpstreamConnector/halfCloseGrace``, is a client
    /// half-closing after its request, which goes on).
    private func leftBeforeArriving(now: NIODeadline) -> Bool {
        guard self.nothingDeliveredUp, let since = self.shapingSince, let driver = self.driver else { return false }
        let setUp = max(driver.model.conditions.baseRTT, UpstreamConnector.halfCloseGrace)
        return now >= since + .nanoseconds(setUp.nanoseconds)
    }

    func read(context: ChannelHandlerContext) {
        if let flow = self.flow, let driver = self.driver,
            !driver.model.senderHasRoom(flow, .up)
        {
            self.readPending = true
            driver.notifyWhenRoom(flow)
            return
        }
        context.read()
    }

    // MARK: Down: server → client

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = self.unwrapOutboundIn(data)
        self.stats.bytesDown += Int64(buffer.readableBytes)
        self.record?.downWritten += Int64(buffer.readableBytes)
        guard let (flow, driver) = self.shaping(holding: !self.down.isEmpty) else {
            self.writeBypassed = true
            self.delivered(buffer.readableBytes)
            context.write(data, promise: promise)
            return
        }
        self.down.append(buffer, promise: promise)
        driver.send(flow, .down, bytes: buffer.readableBytes)
        if self.linkWritable && !driver.model.senderHasRoom(flow, .down) {
            self.linkWritable = false
            driver.notifyWhenRoom(flow)
            context.fireUserInboundEventTriggered(LinkWritabilityChanged(isWritable: false))
        }
    }

    func flush(context: ChannelHandlerContext) {
        // Held bytes are flushed when they are delivered; only what skipped the model is flushed here.
        if self.flow == nil || self.writeBypassed {
            self.writeBypassed = false
            context.flush()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .output && self.flow != nil && !self.down.isEmpty {
            self.outputClosePending.append(promise)
            return
        }
        context.close(mode: mode, promise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let close = event as? CloseWhenDrained {
            promise?.succeed()
            var notBefore = context.eventLoop.now
            if close.crossesLink, self.flow != nil, let driver = self.driver {
                // The far end's FIN or RST is a segment like any other: it takes the one-way latency.
                notBefore = notBefore + .nanoseconds(driver.model.conditions.down.latency.nanoseconds)
            }
            // A reset asked for once stays a reset (an error is often followed by the close it causes).
            self.pendingClose = (close.reset || (self.pendingClose?.reset ?? false), max(notBefore, self.pendingClose?.notBefore ?? notBefore))
            self.closeIfDue(context: context)
            return
        }
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    // MARK: Deliveries from the link

    func deliver(_ direction: Direction, bytes: Int) {
        guard let context = self.context else { return }
        switch direction {
        case .up:
            self.nothingDeliveredUp = false
            for (slice, _) in self.up.take(bytes) {
                context.fireChannelRead(self.wrapInboundOut(slice))
            }
            context.fireChannelReadComplete()
            if self.up.isEmpty && self.inputClosedPending {
                self.inputClosedPending = false
                context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        case .down:
            self.delivered(bytes)
            for (slice, promise) in self.down.take(bytes) {
                context.write(self.wrapOutboundOut(slice), promise: promise)
            }
            context.flush()
            if self.down.isEmpty {
                for promise in self.outputClosePending { context.close(mode: .output, promise: promise) }
                self.outputClosePending = []
                self.closeIfDue(context: context)
            }
        }
    }

    /// Makes a pending full close once every byte before it has been delivered and its moment has
    /// come; otherwise waits for the one or the other (a timer for the moment).
    private func closeIfDue(context: ChannelHandlerContext) {
        guard let (reset, notBefore) = self.pendingClose, self.flow == nil || self.down.isEmpty else { return }
        if context.eventLoop.now < notBefore {
            if self.closeTimer == nil {
                self.closeTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: notBefore) {
                    self.closeTimer = nil
                    if let context = self.context { self.closeIfDue(context: context) }
                }
            }
            return
        }
        self.pendingClose = nil
        self.closeTimer?.cancel()
        self.closeTimer = nil
        if reset {
            context.channel.resetConnection()
        } else {
            context.close(promise: nil)
        }
    }

    /// Resumes reading the client, or lets the proxy read the upstream again, once the emulated
    /// sender's buffer has room. The driver calls it after every pump while this shaper is held
    /// back (it registered with `notifyWhenRoom`), deliveries or not.
    func roomMayHaveChanged() {
        guard let context = self.context, let flow = self.flow, let driver = self.driver else { return }
        if self.readPending && driver.model.senderHasRoom(flow, .up) {
            self.readPending = false
            context.read()
        }
        if !self.linkWritable && driver.model.senderHasRoom(flow, .down) {
            self.linkWritable = true
            context.fireUserInboundEventTriggered(LinkWritabilityChanged(isWritable: true))
        }
        if !self.readPending && self.linkWritable {
            driver.stopWaitingForRoom(flow)
        }
    }
}

extension LinkShaper {
    /// The proxy's own answer (to CONNECT, to a SOCKS5 request) has been written: what follows
    /// comes from the upstream.
    func upstreamBytesFollow() {
        self.record?.originBytesFollow()
    }

    private func delivered(_ bytes: Int) {
        self.stats.bytesDelivered += Int64(bytes)
        self.record?.downDelivered += Int64(bytes)
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
        for promise in self.up.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
        for promise in self.down.drainPromises() { promise?.fail(ChannelError.ioOnClosedChannel) }
        for promise in self.outputClosePending { promise?.fail(ChannelError.ioOnClosedChannel) }
        self.outputClosePending = []
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
