import NIOCore
import NetcondCore

/// What one connection of a Toxiproxy proxy meets on its own, beside the link every connection
/// shares (``ToxicConditions``): a `timeout` toxic's close, `reset_peer`'s reset, `limit_data`'s
/// close, `slow_close`'s late end of stream and `slicer`'s small pieces. It sits next to the
/// client's socket, so it counts the bytes the client actually sent (upstream) and the bytes that
/// reached it after the link's delays (downstream).
///
/// ```
///   client ⇄ [ToxicConnectionHandler] ⇄ byte counter ⇄ link shaper ⇄ … ⇄ upstream server
///              timeout T:     closed once T passes without data in its stream (the link holds that data)
///              reset_peer T:  the stream's data taken, not passed on; reset T after the first of it
///              limit_data N:  closed once N bytes of its stream have passed (the rest is not passed)
///              slow_close D:  the stream's end (a close, a half-close) passed on D later
///              slicer A±V, D: the stream's data passed on in pieces of A±V bytes, D µs apart, in order
/// ```
///
/// A toxic begins for a connection when it is added, or when the connection opens while it is in
/// force; `toxicity` below 1 picks the connections it applies to, a seeded draw per connection and
/// toxic. Updating a toxic's attributes starts it over for every connection, as in Toxiproxy. No
/// byte is lost to slicing or a late close: data waits in order, and an end of stream waits behind it.
final class ToxicConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// One toxic's state on this connection.
    private struct Active {
        var toxic: Toxic
        var applies: Bool
        var passed: Int64 = 0
        var timer: Scheduled<Void>?
    }

    /// One stream's data waiting to go on in slices, and what waits behind it (an end of stream).
    private final class Pending {
        var items: [(buffer: ByteBuffer, promise: EventLoopPromise<Void>?)] = []
        var pausing = false
        var behind: [() -> Void] = []
        var isIdle: Bool { self.items.isEmpty && !self.pausing }
    }

    private let seed: UInt64
    private let index: UInt64
    private var active: [Active] = []
    private var context: ChannelHandlerContext?
    private var ended = false
    private let pendingDown = Pending()
    private let pendingUp = Pending()
    /// Slice sizes.
    private var random: SeededRandom

    init(seed: UInt64, index: UInt64) {
        self.seed = seed
        self.index = index
        self.random = SeededRandom(seed: SeedDeriver.derive(seed, index, 0x51_1ce))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.cancelTimers()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.ended = true
        self.cancelTimers()
        for item in self.pendingDown.items { item.promise?.fail(ChannelError.ioOnClosedChannel) }
        self.pendingDown.items = []
        self.pendingUp.items = []
        context.fireChannelInactive()
    }

    /// The proxy's toxics now (in their order); a toxic new to this connection, or changed, begins.
    func update(_ toxics: [Toxic]) {
        guard !self.ended else { return }
        var next: [Active] = []
        for toxic in toxics where toxic.kind.isPerConnection || toxic.kind.closesAfterTimeout {
            if let old = self.active.first(where: { $0.toxic == toxic }) {
                next.append(old)
                continue
            }
            var random = SeededRandom(seed: SeedDeriver.derive(self.seed, self.index, Self.label(toxic.name)))
            var entry = Active(toxic: toxic, applies: toxic.toxicity >= 1 || random.chance(toxic.toxicity))
            // An updated limit_data keeps counting from what has passed, as Toxiproxy's does.
            if case .limitData = toxic.kind, let old = self.active.first(where: { $0.toxic.name == toxic.name }) {
                entry.passed = old.passed
            }
            next.append(entry)
        }
        for old in self.active where !next.contains(where: { $0.toxic == old.toxic }) {
            old.timer?.cancel()
        }
        self.active = next
        for i in self.active.indices where self.active[i].timer == nil {
            self.armTimeout(i)
        }
    }

    /// A `timeout` toxic with a time closes the connection once that long passes without data in
    /// its stream (from when the toxic began for it, and again from each chunk, as Toxiproxy's).
    private func armTimeout(_ i: Int) {
        guard let context, self.active[i].applies, case .timeout(let milliseconds) = self.active[i].toxic.kind, milliseconds > 0
        else { return }
        self.active[i].timer?.cancel()
        self.active[i].timer = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) {
            self.end(reset: false)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        guard let passed = self.pass(buffer, stream: .upstream) else { return }
        guard self.pendingUp.isIdle && self.slicer(.upstream) == nil else {
            self.pendingUp.items.append((passed, nil))
            self.send(self.pendingUp, stream: .upstream)
            return
        }
        context.fireChannelRead(self.wrapInboundOut(passed))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = self.unwrapOutboundIn(data)
        guard let passed = self.pass(buffer, stream: .downstream) else {
            promise?.succeed()
            return
        }
        guard self.pendingDown.isIdle && self.slicer(.downstream) == nil else {
            self.pendingDown.items.append((passed, promise))
            self.send(self.pendingDown, stream: .downstream)
            return
        }
        context.write(self.wrapOutboundOut(passed), promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        // Slices flush themselves as they go.
        if self.pendingDown.isIdle { context.flush() }
    }

    /// The end of the downstream stream (the server closed, or the proxy closes the connection):
    /// after what waits to be sliced, and `slow_close`'s delay.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        self.afterEnd(of: .downstream) { context.close(mode: mode, promise: promise) }
    }

    /// The client's end of stream (a half-close): after what waits to be sliced, and `slow_close`'s delay.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        self.afterEnd(of: .upstream) { context.fireUserInboundEventTriggered(event) }
    }

    private func afterEnd(of stream: Toxic.Stream, _ action: @escaping () -> Void) {
        let pending = stream == .downstream ? self.pendingDown : self.pendingUp
        let delay = self.active.lazy.compactMap { entry -> Int64? in
            guard entry.applies, entry.toxic.stream == stream, case .slowClose(let delay) = entry.toxic.kind else { return nil }
            return delay
        }.max()
        let whenSent = {
            if pending.isIdle { action() } else { pending.behind.append(action) }
        }
        guard let delay, delay > 0, let context else { return whenSent() }
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) { whenSent() }
    }

    /// The slicer in force on `stream` for this connection: (average size, variation, delay in µs).
    private func slicer(_ stream: Toxic.Stream) -> (average: Int64, variation: Int64, delay: Int64)? {
        for entry in self.active where entry.applies && entry.toxic.stream == stream {
            if case .slicer(let average, let variation, let delay) = entry.toxic.kind { return (average, variation, delay) }
        }
        return nil
    }

    /// Passes on what waits in `pending`, a slice at a time while a slicer is in force (whole
    /// otherwise), pausing the slicer's delay between slices; then what waited behind it.
    private func send(_ pending: Pending, stream: Toxic.Stream) {
        guard let context, !pending.pausing else { return }
        while !pending.items.isEmpty {
            var (buffer, promise) = pending.items.removeFirst()
            let slicer = self.slicer(stream)
            var size = buffer.readableBytes
            if let slicer {
                let variation = slicer.variation > 0 ? Int64.random(in: -slicer.variation...slicer.variation, using: &self.random) : 0
                size = min(size, Int(max(1, slicer.average + variation)))
            }
            let slice = buffer.readSlice(length: size)!
            let last = buffer.readableBytes == 0
            if !last { pending.items.insert((buffer, promise), at: 0) }
            switch stream {
            case .downstream:
                context.writeAndFlush(self.wrapOutboundOut(slice), promise: last ? promise : nil)
            case .upstream:
                context.fireChannelRead(self.wrapInboundOut(slice))
                context.fireChannelReadComplete()
            }
            if let slicer, slicer.delay > 0, !pending.items.isEmpty {
                pending.pausing = true
                context.eventLoop.assumeIsolated().scheduleTask(in: .microseconds(slicer.delay)) {
                    pending.pausing = false
                    self.send(pending, stream: stream)
                }
                return
            }
        }
        let behind = pending.behind
        pending.behind = []
        for action in behind { action() }
    }

    /// What of `buffer` goes on (nil: nothing), after the toxics of `stream` have seen it.
    private func pass(_ buffer: ByteBuffer, stream: Toxic.Stream) -> ByteBuffer? {
        guard !self.ended else { return nil }
        var buffer = buffer
        var endAfter = false
        for i in self.active.indices where self.active[i].applies && self.active[i].toxic.stream == stream {
            switch self.active[i].toxic.kind {
            case .resetPeer(let milliseconds):
                // The data is taken and not passed on (its server never sees it), and the
                // connection is reset that long after the first of it.
                if self.active[i].timer == nil && buffer.readableBytes > 0 {
                    self.active[i].timer = self.context?.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) {
                        self.end(reset: true)
                    }
                }
                return nil
            case .timeout:
                self.armTimeout(i)
            case .limitData(let limit):
                let room = max(0, limit - self.active[i].passed)
                if Int64(buffer.readableBytes) >= room {
                    buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(room)) ?? buffer
                    endAfter = true
                }
                self.active[i].passed += Int64(buffer.readableBytes)
            default:
                break
            }
        }
        if endAfter {
            // After the bytes that fit have gone their way.
            self.context?.eventLoop.assumeIsolated().execute { self.end(reset: false) }
        }
        return buffer.readableBytes > 0 || !endAfter ? buffer : nil
    }

    /// Closes (or resets) the connection; the proxy closes its upstream side in turn.
    private func end(reset: Bool) {
        guard let context, !self.ended else { return }
        self.ended = true
        self.cancelTimers()
        if reset {
            context.channel.resetConnection()
        } else {
            context.flush()
            context.close(promise: nil)
        }
    }

    private func cancelTimers() {
        for entry in self.active { entry.timer?.cancel() }
    }

    private static func label(_ name: String) -> UInt64 {
        // FNV-1a: a stable number for a name (Swift's Hasher is seeded per process).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}

extension Toxic.Kind {
    /// A `timeout` toxic with a time closes each connection it holds when the time is up.
    var closesAfterTimeout: Bool {
        if case .timeout(let milliseconds) = self { return milliseconds > 0 }
        return false
    }
}
