import NIOCore
import NetcondCore

/// What one connection of a Toxiproxy proxy meets on its own, beside the link every connection
/// shares (``ToxicConditions``): a `timeout` toxic's close, `reset_peer`'s reset and `limit_data`'s
/// close. It sits next to the client's socket, so it counts the bytes the client actually sent
/// (upstream) and the bytes that reached it after the link's delays (downstream).
///
/// ```
///   client ⇄ [ToxicConnectionHandler] ⇄ byte counter ⇄ link shaper ⇄ … ⇄ upstream server
///              timeout T:     closed T after the toxic began for this connection
///              reset_peer T:  reset T after the first data of its stream that follows
///              limit_data N:  closed once N bytes of its stream have passed (the rest is not passed)
/// ```
///
/// A toxic begins for a connection when it is added, or when the connection opens while it is in
/// force; `toxicity` below 1 picks the connections it applies to, a seeded draw per connection and
/// toxic. Updating a toxic's attributes starts it over for every connection, as in Toxiproxy.
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

    private let seed: UInt64
    private let index: UInt64
    private var active: [Active] = []
    private var context: ChannelHandlerContext?
    private var ended = false

    init(seed: UInt64, index: UInt64) {
        self.seed = seed
        self.index = index
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
        context.fireChannelInactive()
    }

    /// The proxy's toxics now (in their order); a toxic new to this connection, or changed, begins.
    func update(_ toxics: [Toxic]) {
        guard let context, !self.ended else { return }
        var next: [Active] = []
        for toxic in toxics where toxic.kind.isPerConnection || toxic.kind.closesAfterTimeout {
            if let old = self.active.first(where: { $0.toxic == toxic }) {
                next.append(old)
                continue
            }
            var random = SeededRandom(seed: SeedDeriver.derive(self.seed, self.index, Self.label(toxic.name)))
            var entry = Active(toxic: toxic, applies: toxic.toxicity >= 1 || random.chance(toxic.toxicity))
            if entry.applies, case .timeout(let milliseconds) = toxic.kind, milliseconds > 0 {
                entry.timer = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) {
                    self.end(reset: false)
                }
            }
            next.append(entry)
        }
        for old in self.active where !next.contains(where: { $0.toxic == old.toxic }) {
            old.timer?.cancel()
        }
        self.active = next
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        guard let passed = self.pass(buffer, stream: .upstream) else { return }
        context.fireChannelRead(self.wrapInboundOut(passed))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = self.unwrapOutboundIn(data)
        guard let passed = self.pass(buffer, stream: .downstream) else {
            promise?.succeed()
            return
        }
        context.write(self.wrapOutboundOut(passed), promise: promise)
    }

    /// What of `buffer` goes on (nil: nothing), after the toxics of `stream` have seen it.
    private func pass(_ buffer: ByteBuffer, stream: Toxic.Stream) -> ByteBuffer? {
        guard !self.ended else { return nil }
        var buffer = buffer
        var endAfter = false
        for i in self.active.indices where self.active[i].applies && self.active[i].toxic.stream == stream {
            switch self.active[i].toxic.kind {
            case .resetPeer(let milliseconds) where self.active[i].timer == nil && buffer.readableBytes > 0:
                self.active[i].timer = self.context?.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) {
                    self.end(reset: true)
                }
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
