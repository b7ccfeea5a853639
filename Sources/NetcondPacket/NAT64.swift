import NetcondCore

/// The NAT64 of an IPv6-only run (`ipv6_only:`): IP/ICMP translation (RFC 7915) between the cage's
/// IPv6 packets to the NAT64 prefix and IPv4 packets to the servers behind it, as a carrier's NAT64
/// gateway does, with one IPv4 address of the run's own (its pool, in 127.128.0.0/10) standing for
/// each IPv6 address the cage sends from. Ports are kept: one pool address per cage address, as
/// TAYGA's dynamic pool maps them.
///
/// What it translates: TCP and UDP (each checksum computed anew: a packet the kernel hands over
/// may carry only the partial sum of a checksum offload), and ICMP echo (a ping). Not: IPv4
/// fragments, IPv6 extension headers, ICMP errors (a closed UDP port's "port unreachable" is not
/// carried back): ``toIPv4(_:)`` and ``toIPv6(_:)`` give nil for those, and the engine drops them.
///
/// Why in the engine, not TAYGA or Jool: Jool is a kernel module (most CI machines can load none,
/// and this one has none); TAYGA is a second process on a TUN device that needs host routes for
/// the prefix and its pool, shared by every run on the machine. Here each run translates its own
/// packets at the moment its link delivers them, with nothing to route and nothing left behind.
struct NAT64 {
    let spec: IPv6OnlySpec
    /// The run's pool: 64 addresses, the last 6 bits the index of a cage address.
    let poolBase: [UInt8]
    /// The cage's IPv6 addresses, by their index in the pool (index 0 unused: a .0 address).
    private(set) var sources: [[UInt8]] = [[]]

    /// The pool of the run whose firewall mark has `slot`: 127.128.0.0/10 holds 65,536 pools of 64.
    init(spec: IPv6OnlySpec, slot: UInt16) {
        self.spec = spec
        self.poolBase = Self.pool(slot: slot)
    }

    static func pool(slot: UInt16) -> [UInt8] {
        [127, 0x80 | UInt8(slot >> 10), UInt8((slot >> 2) & 0xff), UInt8((slot & 3) << 6)]
    }

    /// The pool as an address block (`127.128.4.64/26`), for the firewall's rule.
    var poolBlock: String { AddressBlock.format(self.poolBase) + "/26" }

    /// The pool address standing for a cage address, given one when it is new (nil: all 63 taken).
    mutating func poolAddress(for source: [UInt8]) -> [UInt8]? {
        if let index = self.sources.firstIndex(of: source) { return self.address(index) }
        guard self.sources.count < 64 else { return nil }
        self.sources.append(source)
        return self.address(self.sources.count - 1)
    }

    private func address(_ index: Int) -> [UInt8] {
        var address = self.poolBase
        address[3] |= UInt8(index)
        return address
    }

    /// Whether an IPv4 address (4 bytes) is one of this pool's.
    func isPool(_ address: ArraySlice<UInt8>) -> Bool {
        address.count == 4 && address.prefix(3).elementsEqual(self.poolBase.prefix(3))
            && address.last! & 0xc0 == self.poolBase[3]
    }

    /// Whether a packet is IPv6 to the NAT64 prefix (one the link delivers by translating it).
    func goesThrough(_ packet: UnsafeBufferPointer<UInt8>) -> Bool {
        guard packet.count >= 40, packet[0] >> 4 == 6 else { return false }
        for index in 0..<12 where packet[24 + index] != self.spec.prefix[index] { return false }
        return true
    }

    /// Whether a packet is IPv4 to this run's pool (a server's answer to the cage).
    func comesBack(_ packet: UnsafeBufferPointer<UInt8>) -> Bool {
        guard packet.count >= 20, packet[0] >> 4 == 4 else { return false }
        return packet[16] == self.poolBase[0] && packet[17] == self.poolBase[1] && packet[18] == self.poolBase[2]
            && packet[19] & 0xc0 == self.poolBase[3]
    }

    // MARK: - IPv6 to IPv4

    /// The cage's IPv6 packet to the prefix as the IPv4 packet the gateway sends on: from the pool
    /// address of its source, to the IPv4 address in its destination, its hop limit less one.
    mutating func toIPv4(_ packet: [UInt8]) -> [UInt8]? {
        guard packet.count >= 40, packet[0] >> 4 == 6 else { return nil }
        let payloadLength = Int(packet[4]) << 8 | Int(packet[5])
        guard payloadLength > 0, 40 + payloadLength <= packet.count, 20 + payloadLength <= 65535,
            packet[7] > 1, let destination = self.spec.embedded(Array(packet[24..<40])),
            let source = self.poolAddress(for: Array(packet[8..<24]))
        else { return nil }
        var next = packet[6]
        var transport = Array(packet[40..<(40 + payloadLength)])
        switch next {
        case 6, 17:
            break
        case 58:
            // Echo request and reply only.
            guard transport.count >= 8, transport[0] == 128 || transport[0] == 129 else { return nil }
            transport[0] = transport[0] == 128 ? 8 : 0
            next = 1
        default:
            return nil
        }
        let trafficClass = (packet[0] & 0x0f) << 4 | packet[1] >> 4
        let total = 20 + transport.count
        var header: [UInt8] = [
            0x45, trafficClass, UInt8(total >> 8), UInt8(total & 0xff), 0, 0, 0x40, 0, packet[7] - 1, next, 0, 0,
        ]
        header += source + destination
        let check = Self.checksum(Self.sum(header[...]))
        header[10] = UInt8(check >> 8)
        header[11] = UInt8(check & 0xff)
        Self.fillChecksum(&transport, protocol: next, pseudo: source + destination)
        return header + transport
    }

    // MARK: - IPv4 to IPv6

    /// A server's IPv4 packet to the pool as the IPv6 packet the cage receives: from the prefix
    /// and the server's address, to the cage address the pool address stands for.
    func toIPv6(_ packet: [UInt8]) -> [UInt8]? {
        guard packet.count >= 20, packet[0] >> 4 == 4 else { return nil }
        let headerLength = Int(packet[0] & 0x0f) * 4
        let total = Int(packet[2]) << 8 | Int(packet[3])
        // A fragment, or a header that lies about its lengths: not translated.
        guard headerLength >= 20, total > headerLength, total <= packet.count, packet[6] & 0x3f == 0, packet[7] == 0,
            packet[8] > 1, self.isPool(packet[16..<20])
        else { return nil }
        let index = Int(packet[19] & 0x3f)
        guard index > 0, index < self.sources.count else { return nil }
        var next = packet[9]
        var transport = Array(packet[headerLength..<total])
        switch next {
        case 6, 17:
            break
        case 1:
            guard transport.count >= 8, transport[0] == 8 || transport[0] == 0 else { return nil }
            transport[0] = transport[0] == 8 ? 128 : 129
            next = 58
        default:
            return nil
        }
        let source = self.spec.synthesized(Array(packet[12..<16]))
        let destination = self.sources[index]
        var header: [UInt8] = [
            0x60 | packet[1] >> 4, (packet[1] & 0x0f) << 4, 0, 0, UInt8(transport.count >> 8),
            UInt8(transport.count & 0xff), next, packet[8] - 1,
        ]
        header += source + destination
        Self.fillChecksum(&transport, protocol: next, pseudo: source + destination)
        return header + transport
    }

    // MARK: - Checksums

    /// Writes the transport's checksum anew: TCP's, UDP's (never 0: that means "none" in IPv4 and
    /// is not allowed in IPv6) and ICMPv6's over the pseudo-header; ICMP's over itself alone.
    static func fillChecksum(_ transport: inout [UInt8], protocol next: UInt8, pseudo addresses: [UInt8]) {
        let at: Int
        switch next {
        case 6: at = 16
        case 17: at = 6
        case 1, 58: at = 2
        default: return
        }
        guard transport.count >= at + 2 else { return }
        transport[at] = 0
        transport[at + 1] = 0
        if next == 17 {
            // UDP's length field says what the header and data hold (the datagram's own size).
            let length = transport.count
            transport[4] = UInt8(length >> 8)
            transport[5] = UInt8(length & 0xff)
        }
        var sum = Self.sum(transport[...])
        if next != 1 {
            let length = UInt32(transport.count)
            sum += Self.sum(addresses[...]) + UInt32(next) + (length >> 16) + (length & 0xffff)
        }
        var check = Self.checksum(sum)
        if next == 17 && check == 0 { check = 0xffff }
        transport[at] = UInt8(check >> 8)
        transport[at + 1] = UInt8(check & 0xff)
    }

    /// The one's-complement sum of 16-bit words (an odd last byte padded with zero), not folded.
    static func sum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var sum: UInt32 = 0
        var index = bytes.startIndex
        while index + 1 < bytes.endIndex {
            sum &+= UInt32(bytes[index]) << 8 | UInt32(bytes[index + 1])
            index += 2
        }
        if index < bytes.endIndex { sum &+= UInt32(bytes[index]) << 8 }
        return sum
    }

    /// The checksum of a sum: folded to 16 bits, complemented.
    static func checksum(_ sum: UInt32) -> UInt16 {
        var folded = UInt64(sum)
        while folded >> 16 != 0 { folded = (folded & 0xffff) + (folded >> 16) }
        return ~UInt16(folded)
    }
}

/// What the NAT64 does with `packet`, for a fuzzer: translated as the cage's IPv6 packet to the
/// prefix, the result translated back as a server's answer, and `packet` itself as a server's
/// IPv4 answer. Returns the bytes made, so that nothing is optimised away.
public func translateNAT64(_ packet: [UInt8]) -> Int {
    var nat64 = NAT64(spec: IPv6OnlySpec(), slot: 0x1234)
    var made = 0
    if let ipv4 = nat64.toIPv4(packet) {
        made += ipv4.count
        // The answer comes back from the server to the pool address: swap the addresses.
        var answer = ipv4
        answer.replaceSubrange(12..<20, with: Array(ipv4[16..<20]) + Array(ipv4[12..<16]))
        made += nat64.toIPv6(answer)?.count ?? 0
    }
    made += nat64.toIPv6(packet)?.count ?? 0
    return made
}
