/// What the engine reads of any packet's head besides TCP's: its protocol, its addresses, and
/// the ports (UDP) or message type (ICMP), from the copied head (IPv4, or IPv6 without extension
/// headers).
struct PacketHead {
    var version: UInt8
    /// 6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, …
    var proto: UInt8
    var source: PacketAddress
    var destination: PacketAddress
    /// The IP header's length: the transport header starts here.
    var headerLength: Int
    /// UDP's (and TCP's) ports, when the head holds them.
    var sourcePort: UInt16?
    var destinationPort: UInt16?
    /// ICMP's (and ICMPv6's) message type.
    var icmpType: UInt8?

    static let tcp: UInt8 = 6
    static let udp: UInt8 = 17

    /// Nil for a head too short to hold an IP header, or of another IP version.
    init?(_ bytes: UnsafePointer<UInt8>, copied: Int) {
        guard copied >= 20 else { return nil }
        self.version = bytes[0] >> 4
        if self.version == 4 {
            self.headerLength = Int(bytes[0] & 0x0f) * 4
            self.proto = bytes[9]
            self.source = PacketAddress(bytes + 12, count: 4)
            self.destination = PacketAddress(bytes + 16, count: 4)
        } else if self.version == 6, copied >= 40 {
            self.headerLength = 40
            self.proto = bytes[6]
            self.source = PacketAddress(bytes + 8, count: 16)
            self.destination = PacketAddress(bytes + 24, count: 16)
        } else {
            return nil
        }
        guard copied >= self.headerLength + 4 else { return }
        let transport = bytes + self.headerLength
        switch self.proto {
        case Self.tcp, Self.udp:
            self.sourcePort = UInt16(transport[0]) << 8 | UInt16(transport[1])
            self.destinationPort = UInt16(transport[2]) << 8 | UInt16(transport[3])
        case 1, 58: self.icmpType = transport[0]
        default: break
        }
    }

    /// An echo request (ping) of either version.
    var isEchoRequest: Bool { (self.proto == 1 && self.icmpType == 8) || (self.proto == 58 && self.icmpType == 128) }
    var isUDP: Bool { self.proto == Self.udp }

    /// Where the DNS message this packet carries starts and ends in its `copied` bytes, when it is
    /// one to or from port 53 (`server`: the port on the server's side, `destinationPort` for a
    /// query, `sourcePort` for an answer): after UDP's header; over TCP, after the segment's header
    /// and the message's two-byte length, and only when the segment holds the whole message (a
    /// message split over segments is not read). Nil otherwise.
    func dnsMessage(_ bytes: UnsafePointer<UInt8>, copied: Int, serverPort: UInt16?) -> Range<Int>? {
        guard serverPort == 53 else { return nil }
        if self.isUDP {
            let start = self.headerLength + 8
            return start < copied ? start..<copied : nil
        }
        guard self.proto == Self.tcp, copied >= self.headerLength + 20 else { return nil }
        let start = self.headerLength + Int(bytes[self.headerLength + 12] >> 4) * 4 + 2
        guard start <= copied else { return nil }
        let length = Int(bytes[start - 2]) << 8 | Int(bytes[start - 1])
        return length > 0 && start + length <= copied ? start..<(start + length) : nil
    }

    /// The destination as text (dotted IPv4, or bracketed IPv6).
    var destinationText: String { PacketAddress.text(self.destination.bytes(count: self.version == 6 ? 16 : 4)) }
}
