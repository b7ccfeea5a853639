import NIOCore
import NetcondCore

/// The SOCKS5 server side (RFC 1928), no authentication, CONNECT only, as a pure parser.
///
/// ```
///  client: 05 n methods…            server: 05 00          (no authentication)
///  client: 05 01 00 atyp addr port  server: 05 rep 00 01 0.0.0.0 0
/// ```
/// Names (atyp 3) are resolved by the proxy, so the profile's DNS delay applies to them.
package struct SOCKS5Parser {
    package enum Step: Equatable {
        /// More bytes are needed.
        case needMore
        /// Send these bytes; if `close`, close afterwards.
        case reply([UInt8], close: Bool)
        /// The client asked to connect here; `leftover` bytes followed the request.
        case connect(UpstreamTarget, leftover: [UInt8])
    }

    private enum State {
        case greeting
        case request
        case done
    }

    private var state = State.greeting
    private var buffer: [UInt8] = []

    package init() {}

    package mutating func feed(_ bytes: [UInt8]) -> [Step] {
        self.buffer += bytes
        var steps: [Step] = []
        while true {
            let step = self.next()
            if step == .needMore { break }
            steps.append(step)
            if case .reply(_, close: true) = step { break }
            if case .connect = step { break }
        }
        return steps
    }

    private mutating func next() -> Step {
        switch self.state {
        case .done:
            return .needMore
        case .greeting:
            guard self.buffer.count >= 2 else { return .needMore }
            guard self.buffer[0] == 5 else {
                self.state = .done
                return .reply([5, 0xFF], close: true)
            }
            let count = Int(self.buffer[1])
            guard self.buffer.count >= 2 + count else { return .needMore }
            let methods = self.buffer[2..<(2 + count)]
            self.buffer.removeFirst(2 + count)
            guard methods.contains(0) else {
                self.state = .done
                return .reply([5, 0xFF], close: true)
            }
            self.state = .request
            return .reply([5, 0], close: false)
        case .request:
            guard self.buffer.count >= 5 else { return .needMore }
            guard self.buffer[0] == 5 else {
                self.state = .done
                return .reply(Self.failure(0x01), close: true)
            }
            let addressLength: Int
            switch self.buffer[3] {
            case 1: addressLength = 4
            case 3: addressLength = 1 + Int(self.buffer[4])
            case 4: addressLength = 16
            default:
                self.state = .done
                return .reply(Self.failure(0x08), close: true)
            }
            let total = 4 + addressLength + 2
            guard self.buffer.count >= total else { return .needMore }
            guard self.buffer[1] == 1 else {
                self.state = .done
                return .reply(Self.failure(0x07), close: true)
            }
            let addressType = self.buffer[3]
            let address = Array(self.buffer[4..<(4 + addressLength)])
            let port = Int(self.buffer[total - 2]) << 8 | Int(self.buffer[total - 1])
            let leftover = Array(self.buffer[total...])
            self.buffer = []
            self.state = .done
            let host: String
            switch addressType {
            case 1: host = address.map(String.init).joined(separator: ".")
            case 4:
                host = stride(from: 0, to: 16, by: 2).map {
                    String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16)
                }.joined(separator: ":")
            default:
                host = String(decoding: address.dropFirst(), as: UTF8.self)
            }
            guard port > 0, !host.isEmpty else { return .reply(Self.failure(0x04), close: true) }
            return .connect(UpstreamTarget(host: host, port: port), leftover: leftover)
        }
    }

    static func success() -> [UInt8] { [5, 0, 0, 1, 0, 0, 0, 0, 0, 0] }
    static func failure(_ code: UInt8) -> [UInt8] { [5, code, 0, 1, 0, 0, 0, 0, 0, 0] }
}

/// Runs the SOCKS5 negotiation on a client channel, then glues it to the upstream.
final class SOCKS5Handler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var parser = SOCKS5Parser()
    private let shaper: LinkShaper
    private let connector: UpstreamConnector
    private var connecting = false
    /// The upstream connection being made, until its outcome is known.
    private var attempt: ConnectAttempt?
    /// A client that has not finished its negotiation by then is let go (as the sniffer does).
    private var deadline: Scheduled<Void>?
    /// Bytes a client sent after its request, before the tunnel was up: they go first once it is.
    private var early: [UInt8] = []

    init(shaper: LinkShaper, connector: UpstreamConnector) {
        self.shaper = shaper
        self.connector = connector
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.deadline = context.eventLoop.assumeIsolated().scheduleTask(in: ProtocolSniffer.handshakeTimeout) {
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.deadline?.cancel()
        self.deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
        if self.connecting {
            self.early += bytes
            return
        }
        for step in self.parser.feed(bytes) {
            switch step {
            case .needMore:
                break
            case .reply(let reply, let close):
                context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(bytes: reply)))
                    .assumeIsolated().whenComplete { _ in if close { context.close(promise: nil) } }
            case .connect(let target, let leftover):
                self.connecting = true
                self.deadline?.cancel()  // the set-up has its own time (the emulated SYN retries)
                self.deadline = nil
                self.early = leftover
                self.connect(context: context, target: target)
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The client left mid-negotiation, or before its tunnel was up (it could not have
            // half-closed a connection it was still making): the attempt is given up, nothing of
            // it reaches the server.
            self.attempt?.abandon()
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.attempt?.abandon()
        context.fireChannelInactive()
    }

    private func connect(context: ChannelHandlerContext, target: UpstreamTarget) {
        let flow = self.shaper.prepareFlow()
        let shaper = self.shaper
        self.attempt = self.connector.connect(to: target, flow: flow) { result in
            self.attempt = nil
            let leftover = self.early
            self.early = []
            switch result {
            case .failure(.abandoned):
                break  // the client is gone
            case .failure(let error):
                let reply = context.channel.allocator.buffer(bytes: SOCKS5Parser.failure(error.socksReply))
                context.writeAndFlush(NIOAny(reply)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            case .success(let upstream):
                guard context.channel.isActive else {
                    upstream.close(promise: nil)
                    return
                }
                let reply = context.channel.allocator.buffer(bytes: SOCKS5Parser.success())
                context.writeAndFlush(NIOAny(reply), promise: nil)
                shaper.upstreamBytesFollow()
                shaper.beginShaping()
                let (clientGlue, upstreamGlue) = GlueHandler.matchedPair()
                do {
                    try upstream.pipeline.syncOperations.addHandler(upstreamGlue)
                    if !leftover.isEmpty {
                        upstream.writeAndFlush(upstream.allocator.buffer(bytes: leftover), promise: nil)
                    }
                    try context.pipeline.syncOperations.addHandler(clientGlue)
                    context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                    upstream.setOption(.autoRead, value: true).whenFailure { _ in upstream.close(promise: nil) }
                } catch {
                    upstream.close(promise: nil)
                    context.close(promise: nil)
                }
            }
        }
    }
}
