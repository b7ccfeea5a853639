import NIOCore
import NIOPosix
import NetcondCore

/// The DNS server a packet-engine run's command asks first (its /etc/resolv.conf names it): A
/// queries for names under `netcond.test` get the name's own address (``PacketNames``), where the
/// built-in origin listens; other queries for those names get "no error, no answer" (AAAA: clients
/// go on with IPv4); a query for any other name is refused, and the resolver asks the machine's
/// next nameserver. UDP and TCP, on port 53 of the origin's address; the queries cross the link as
/// any DNS does (a `dns_fail` name's is answered there, by the engine, before it gets here).
final class PacketDNSResponder: Sendable {
    private let channels: [Channel]

    private init(channels: [Channel]) {
        self.channels = channels
    }

    /// Listens on `host` port 53 (UDP and TCP) on `loop`.
    static func start(host: String, names: PacketNames, loop: EventLoop) async throws -> PacketDNSResponder {
        let udp = try await DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(UDPHandler(names: names))
                }
            }
            .bind(host: host, port: 53).get()
        do {
            let tcp = try await ServerBootstrap(group: loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(TCPFrames()))
                        try channel.pipeline.syncOperations.addHandler(TCPHandler(names: names))
                    }
                }
                .bind(host: host, port: 53).get()
            return PacketDNSResponder(channels: [udp, tcp])
        } catch {
            try? await udp.close()
            throw error
        }
    }

    func stop() async {
        for channel in self.channels { try? await channel.close() }
    }

    /// The answer to `query` (a DNS message): nil when it is no query to answer (too short, a
    /// response), or when it waits on a name's listeners.
    static func answer(_ query: [UInt8], names: PacketNames, loop: EventLoop) -> EventLoopFuture<[UInt8]>? {
        guard let question = Query(query) else { return nil }
        guard question.class == 1, OriginHost.isOwn(question.name) else {
            return loop.makeSucceededFuture(question.reply(rcode: 5))
        }
        guard question.type == 1 else { return loop.makeSucceededFuture(question.reply(rcode: 0)) }
        return names.lookup(question.name).map { lookup in
            switch lookup {
            case .address(let address): return question.reply(rcode: 0, address: address)
            case .failed: return question.reply(rcode: 2)
            }
        }
    }

    /// A standard query with one question: what the reply repeats of it.
    struct Query {
        var bytes: [UInt8]
        var name: String
        var type: Int
        var `class`: Int
        /// Where the question ends.
        var end: Int

        init?(_ bytes: [UInt8]) {
            // A query (QR 0), opcode 0, one question.
            guard bytes.count >= 12, bytes[2] & 0xf8 == 0, bytes[4] == 0, bytes[5] == 1 else { return nil }
            var labels: [String] = []
            var at = 12
            while at < bytes.count, bytes[at] != 0 {
                let length = Int(bytes[at])
                guard length < 64, at + 1 + length < bytes.count, labels.count < 128 else { return nil }
                labels.append(String(decoding: bytes[(at + 1)..<(at + 1 + length)], as: UTF8.self))
                at += 1 + length
            }
            guard at + 5 <= bytes.count else { return nil }
            self.bytes = bytes
            self.name = labels.joined(separator: ".").lowercased()
            self.type = Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            self.class = Int(bytes[at + 3]) << 8 | Int(bytes[at + 4])
            self.end = at + 5
        }

        /// The reply: the query's id, its RD; authoritative, `rcode`; its question; with `address`
        /// (dotted IPv4) one A record for it, 60 seconds.
        func reply(rcode: UInt8, address: String? = nil) -> [UInt8] {
            let octets = address?.split(separator: ".").compactMap { UInt8($0) } ?? []
            let answers: UInt8 = octets.count == 4 ? 1 : 0
            var reply: [UInt8] = [
                self.bytes[0], self.bytes[1], 0x84 | (self.bytes[2] & 0x01), 0x80 | rcode, 0, 1, 0, answers, 0, 0, 0, 0,
            ]
            reply += self.bytes[12..<self.end]
            if answers == 1 { reply += [0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4] + octets }
            return reply
        }
    }

    private final class UDPHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        typealias OutboundOut = AddressedEnvelope<ByteBuffer>
        let names: PacketNames

        init(names: PacketNames) {
            self.names = names
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let envelope = self.unwrapInboundIn(data)
            let query = Array(envelope.data.readableBytesView)
            guard let answer = PacketDNSResponder.answer(query, names: self.names, loop: context.eventLoop) else {
                return
            }
            let channel = context.channel
            answer.whenSuccess { bytes in
                let reply = AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: ByteBuffer(bytes: bytes))
                channel.writeAndFlush(reply, promise: nil)
            }
        }
    }

    /// DNS over TCP: each message after its two-byte length.
    private struct TCPFrames: ByteToMessageDecoder {
        typealias InboundOut = [UInt8]

        mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
            guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
                buffer.readableBytes >= 2 + Int(length)
            else { return .needMoreData }
            buffer.moveReaderIndex(forwardBy: 2)
            context.fireChannelRead(Self.wrapInboundOut(buffer.readBytes(length: Int(length)) ?? []))
            return .continue
        }
    }

    private final class TCPHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = [UInt8]
        typealias OutboundOut = ByteBuffer
        let names: PacketNames

        init(names: PacketNames) {
            self.names = names
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let query = self.unwrapInboundIn(data)
            guard let answer = PacketDNSResponder.answer(query, names: self.names, loop: context.eventLoop) else {
                context.close(promise: nil)
                return
            }
            let channel = context.channel
            answer.whenSuccess { bytes in
                var buffer = ByteBuffer()
                buffer.writeInteger(UInt16(bytes.count))
                buffer.writeBytes(bytes)
                channel.writeAndFlush(buffer, promise: nil)
            }
        }
    }
}
