import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// The DNS server a packet-engine run's command asks first (its /etc/resolv.conf names it): A
/// queries for names under `netcond.test` get the name's own address (``PacketNames``), where the
/// built-in origin listens; other queries for those names get "no error, no answer" (AAAA: clients
/// go on with IPv4); a query for any other name is refused, and the resolver asks the machine's
/// next nameserver. UDP and TCP, on port 53 of the origin's address; the queries cross the link as
/// any DNS does (a `dns_fail` name's is answered there, by the engine, before it gets here). On an
/// IPv6-only run it is the network's DNS64 instead, for every name (``answer(_:names:loop:dns64:)``).
final class PacketDNSResponder: Sendable {
    private let channels: [Channel]

    private init(channels: [Channel]) {
        self.channels = channels
    }

    /// Listens on `host` port 53 (UDP and TCP) on `loop`.
    static func start(
        host: String, names: PacketNames, loop: EventLoop, dns64: IPv6OnlySpec? = nil
    ) async throws -> PacketDNSResponder {
        let udp = try await DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(UDPHandler(names: names, dns64: dns64))
                }
            }
            .bind(host: host, port: 53).get()
        do {
            let tcp = try await ServerBootstrap(group: loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(TCPFrames()))
                        try channel.pipeline.syncOperations.addHandler(TCPHandler(names: names, dns64: dns64))
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
    /// response), or when it waits on a name's listeners. With `dns64` (an IPv6-only run) it is the
    /// network's DNS64: a name's AAAA record is its IPv4 address in the NAT64 prefix, and it has no
    /// A record (the device, with no IPv4 address, would not ask for one: glibc's AI_ADDRCONFIG);
    /// `ipv4only.arpa` gives the prefix away as RFC 7050 says, for clients that look for it.
    static func answer(
        _ query: [UInt8], names: PacketNames, loop: EventLoop, dns64: IPv6OnlySpec? = nil
    ) -> EventLoopFuture<[UInt8]>? {
        guard let question = Query(query) else { return nil }
        let wanted = dns64 == nil ? Self.a : Self.aaaa
        if let dns64, question.class == 1, question.name == "ipv4only.arpa" {
            let records = Self.ipv4OnlyArpa.map { question.type == Self.a ? $0 : dns64.synthesized($0) }
            return loop.makeSucceededFuture(
                question.reply(rcode: 0, records: [Self.a, Self.aaaa].contains(question.type) ? records : []))
        }
        guard question.class == 1, OriginHost.isOwn(question.name) else {
            if let dns64, question.class == 1, question.type == Self.a || question.type == Self.aaaa {
                return Self.forwarded(question, dns64: dns64, loop: loop)
            }
            return loop.makeSucceededFuture(question.reply(rcode: 5))
        }
        if dns64 != nil, question.type == Self.a || question.type == Self.aaaa {
            names.noteAsk(question.name, ipv4: question.type == Self.a)
        }
        guard question.type == wanted else { return loop.makeSucceededFuture(question.reply(rcode: 0)) }
        return names.lookup(question.name).map { lookup in
            switch lookup {
            case .address(let address):
                guard let bytes = AddressBlock.parseAddress(address), bytes.count == 4 else {
                    return question.reply(rcode: 2)
                }
                return question.reply(rcode: 0, records: [dns64?.synthesized(bytes) ?? bytes])
            case .failed: return question.reply(rcode: 2)
            }
        }
    }

    /// A name that is not the run's, on an IPv6-only run, as a carrier's DNS64 answers it: its own
    /// IPv6 addresses when it has some, else its IPv4 ones in the NAT64 prefix (AAAA); no A record
    /// (the device has no IPv4); no such name when neither exists. Looked up as this machine
    /// looks names up (its resolver, its hosts file), off the event loop.
    static func forwarded(
        _ question: Query, dns64: IPv6OnlySpec, loop: EventLoop,
        lookUp: @escaping @Sendable (String, Int32) -> [[UInt8]]? = PacketDNSResponder.systemAddresses,
        underWay: NIOLockedValueBox<Int> = PacketDNSResponder.lookupsUnderWay
    ) -> EventLoopFuture<[UInt8]> {
        // Each lookup holds a thread until the resolver answers: a command asking for many names
        // that never resolve gets "server failure" beyond the bound, as an overloaded resolver answers,
        // rather than queueing work without end.
        guard
            underWay.withLockedValue({ count in
                guard count < Self.lookupBound else { return false }
                count += 1
                return true
            })
        else { return loop.makeSucceededFuture(question.reply(rcode: 2)) }
        return NIOThreadPool.singleton.runIfActive(eventLoop: loop) { () -> [UInt8] in
            let native = (lookUp(question.name, AF_INET6) ?? []).filter { !Self.isMapped($0) }
            let ipv4 = lookUp(question.name, AF_INET) ?? []
            if native.isEmpty && ipv4.isEmpty { return question.reply(rcode: 3) }
            guard question.type == Self.aaaa else { return question.reply(rcode: 0) }
            return question.reply(rcode: 0, records: native.isEmpty ? ipv4.map(dns64.synthesized) : native)
        }.always { _ in underWay.withLockedValue { $0 -= 1 } }
    }

    /// Lookups of other names under way in this process, and how many may be.
    static let lookupsUnderWay = NIOLockedValueBox(0)
    static let lookupBound = 32

    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`): IPv4 written as IPv6, not IPv6.
    static func isMapped(_ address: [UInt8]) -> Bool {
        address.count == 16 && address.prefix(10).allSatisfy { $0 == 0 } && address[10] == 0xff && address[11] == 0xff
    }

    /// The addresses of one family (`AF_INET`, `AF_INET6`) getaddrinfo gives a name, at most 16,
    /// each once (nil: none).
    @Sendable static func systemAddresses(_ name: String, _ family: Int32) -> [[UInt8]]? {
        var hints = addrinfo()
        hints.ai_family = family
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var found: [[UInt8]] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry, found.count < 16 {
            defer { entry = current.pointee.ai_next }
            guard let address = current.pointee.ai_addr else { continue }
            let bytes: [UInt8]
            if current.pointee.ai_family == AF_INET6 {
                bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }
                }
            } else {
                bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) }
                }
            }
            if !found.contains(bytes) { found.append(bytes) }
        }
        return found.isEmpty ? nil : found
    }

    static let a = 1
    static let aaaa = 28
    /// RFC 7050's well-known IPv4-only name's two addresses.
    static let ipv4OnlyArpa: [[UInt8]] = [[192, 0, 0, 170], [192, 0, 0, 171]]

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

        /// The reply: the query's id, its RD; authoritative, `rcode`; its question; one record of
        /// 60 seconds per address in `records` (4 bytes: A; 16: AAAA).
        func reply(rcode: UInt8, records: [[UInt8]] = []) -> [UInt8] {
            let answers = records.filter { $0.count == 4 || $0.count == 16 }
            var reply: [UInt8] = [
                self.bytes[0], self.bytes[1], 0x84 | (self.bytes[2] & 0x01), 0x80 | rcode, 0, 1, 0,
                UInt8(answers.count), 0, 0, 0, 0,
            ]
            reply += self.bytes[12..<self.end]
            for address in answers {
                let type: UInt8 = address.count == 4 ? 1 : 28
                reply += [0xc0, 12, 0, type, 0, 1, 0, 0, 0, 60, 0, UInt8(address.count)] + address
            }
            return reply
        }
    }

    private final class UDPHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        typealias OutboundOut = AddressedEnvelope<ByteBuffer>
        let names: PacketNames
        let dns64: IPv6OnlySpec?

        init(names: PacketNames, dns64: IPv6OnlySpec?) {
            self.names = names
            self.dns64 = dns64
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let envelope = self.unwrapInboundIn(data)
            let query = Array(envelope.data.readableBytesView)
            guard
                let answer = PacketDNSResponder.answer(
                    query, names: self.names, loop: context.eventLoop, dns64: self.dns64)
            else {
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
        let dns64: IPv6OnlySpec?

        init(names: PacketNames, dns64: IPv6OnlySpec?) {
            self.names = names
            self.dns64 = dns64
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let query = self.unwrapInboundIn(data)
            guard
                let answer = PacketDNSResponder.answer(
                    query, names: self.names, loop: context.eventLoop, dns64: self.dns64)
            else {
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
