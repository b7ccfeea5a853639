/// A TCP segment read out of a captured packet: below it the link header (raw IP, Ethernet with
/// 802.1Q tags, Linux cooked v1/v2, BSD loopback), IPv4 (first fragments only) or IPv6 (extension
/// headers walked), and of TCP only its header. The payload's length comes from the IP length, not
/// from what was captured: captures are often cut at 96 bytes.
///
/// ```
///  [link header][IPv4 hdr (IHL) | IPv6 hdr + ext hdrs][TCP hdr (data offset)][payload … (maybe not captured)]
///                └─ total length / payload length ────────────────────────────────────────────┘
/// ```
public struct CapturedSegment: Sendable, Equatable {
    public var source: Endpoint
    public var destination: Endpoint
    public var sequence: UInt32
    public var acknowledgement: UInt32
    public var flags: Flags
    /// TCP payload bytes the packet carried.
    public var payloadLength: Int
    /// The IP packet's length (header included).
    public var ipLength: Int
    /// The receive window it advertised, unscaled (nil when the capture cut the header before it).
    public var window: UInt16? = nil
    /// A SYN's window scale option (nil: none, or not captured).
    public var windowScale: UInt8? = nil

    /// The TCP flags the recorder reads.
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let fin = Flags(rawValue: 0x01)
        public static let syn = Flags(rawValue: 0x02)
        public static let rst = Flags(rawValue: 0x04)
        public static let ack = Flags(rawValue: 0x10)
    }

    /// An address and port; IPv4 addresses are held as IPv4-mapped IPv6 ones.
    public struct Endpoint: Sendable, Hashable, Comparable, CustomStringConvertible {
        public var high: UInt64
        public var low: UInt64
        public var port: UInt16
        public var isIPv4: Bool

        public init(address: [UInt8], port: UInt16) {
            precondition(address.count == 4 || address.count == 16, "an IP address is 4 or 16 bytes")
            let full = address.count == 4 ? [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF] + address : address
            self.high = full[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
            self.low = full[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
            self.port = port
            self.isIPv4 = address.count == 4
        }

        public static func < (a: Endpoint, b: Endpoint) -> Bool {
            (a.high, a.low, a.port) < (b.high, b.low, b.port)
        }

        /// The address as written: `10.0.0.1`, `2001:db8::1` (RFC 5952, as ``AddressBlock/format(_:)``).
        public var address: String {
            let bytes = (0..<16).map {
                UInt8(truncatingIfNeeded: ($0 < 8 ? self.high : self.low) >> UInt64(56 - 8 * ($0 % 8)))
            }
            return AddressBlock.format(self.isIPv4 ? Array(bytes[12...]) : bytes)
        }

        /// `10.0.0.1:443`, `[2001:db8::1]:443`.
        public var description: String {
            self.isIPv4 ? "\(self.address):\(self.port)" : "[\(self.address)]:\(self.port)"
        }
    }

    /// Link types read, by their pcap number, as named in errors.
    public static let linkTypes: [(number: UInt32, name: String)] = [
        (0, "NULL"), (1, "EN10MB"), (12, "RAW"), (14, "RAW"), (101, "RAW"), (108, "LOOP"), (113, "LINUX_SLL"),
        (276, "LINUX_SLL2"),
    ]

    public static func isSupported(linkType: UInt32) -> Bool {
        self.linkTypes.contains { $0.number == linkType }
    }

    /// What the allowed link types are, for an error.
    public static var allowedLinkTypes: String {
        "RAW (101, 12, 14), EN10MB (1, Ethernet), LINUX_SLL (113), LINUX_SLL2 (276), NULL (0), LOOP (108)"
    }

    /// The TCP segment in a captured packet, or nil when it holds none (another protocol, a later
    /// IPv4 fragment, headers cut by the capture). `bytes` starts with the link header.
    public static func decode(linkType: UInt32, bytes: [UInt8], originalLength: Int) -> CapturedSegment? {
        guard let (start, family) = self.network(linkType: linkType, bytes) else { return nil }
        let onWire = originalLength - start
        switch family {
        case .ipv4: return self.ipv4(bytes, start, onWire: onWire)
        case .ipv6: return self.ipv6(bytes, start, onWire: onWire)
        case .unknown:
            guard start < bytes.count else { return nil }
            switch bytes[start] >> 4 {
            case 4: return self.ipv4(bytes, start, onWire: onWire)
            case 6: return self.ipv6(bytes, start, onWire: onWire)
            default: return nil
            }
        }
    }

    enum Family { case ipv4, ipv6, unknown }

    /// Where the IP packet starts after the link header, and what it is (when the header says).
    static func network(linkType: UInt32, _ bytes: [UInt8]) -> (Int, Family)? {
        func etherType(_ value: UInt16) -> Family? {
            switch value {
            case 0x0800: return .ipv4
            case 0x86DD: return .ipv6
            default: return nil
            }
        }
        switch linkType {
        case 12, 14, 101:
            return (0, .unknown)
        case 1:
            var at = 12
            while at + 2 <= bytes.count {
                let type = self.uint16(bytes, at)
                // 802.1Q, 802.1ad and the older QinQ tags: 4 bytes each, then the type again.
                if type == 0x8100 || type == 0x88A8 || type == 0x9100 {
                    at += 4
                    continue
                }
                return etherType(type).map { (at + 2, $0) }
            }
            return nil
        case 113:
            guard bytes.count >= 16 else { return nil }
            return etherType(self.uint16(bytes, 14)).map { (16, $0) }
        case 276:
            guard bytes.count >= 20 else { return nil }
            return etherType(self.uint16(bytes, 0)).map { (20, $0) }
        case 0, 108:
            // The address family, in the writer's byte order (NULL) or network order (LOOP): read
            // whichever way gives a small number. IPv6 is 10 (Linux), 24, 28 or 30 (the BSDs, macOS).
            guard bytes.count >= 4 else { return nil }
            let big = UInt32(self.uint16(bytes, 0)) << 16 | UInt32(self.uint16(bytes, 2))
            let family = big < 256 ? big : big.byteSwapped
            switch family {
            case 2: return (4, .ipv4)
            case 10, 24, 28, 30: return (4, .ipv6)
            default: return nil
            }
        default:
            return nil
        }
    }

    static func ipv4(_ bytes: [UInt8], _ start: Int, onWire: Int) -> CapturedSegment? {
        guard bytes.count >= start + 20, bytes[start] >> 4 == 4 else { return nil }
        let headerLength = Int(bytes[start] & 0x0F) * 4
        guard headerLength >= 20, bytes[start + 9] == 6 else { return nil }
        // A fragment other than the first holds no TCP header.
        guard self.uint16(bytes, start + 6) & 0x1FFF == 0 else { return nil }
        var total = Int(self.uint16(bytes, start + 2))
        // 0 is what a segmentation offload on the capturing host leaves in a packet over 64 KB.
        if total == 0 { total = onWire }
        let source = Array(bytes[(start + 12)..<(start + 16)])
        let destination = Array(bytes[(start + 16)..<(start + 20)])
        return self.tcp(bytes, start + headerLength, left: total - headerLength, ipLength: total, source, destination)
    }

    static func ipv6(_ bytes: [UInt8], _ start: Int, onWire: Int) -> CapturedSegment? {
        guard bytes.count >= start + 40, bytes[start] >> 4 == 6 else { return nil }
        var payload = Int(self.uint16(bytes, start + 4))
        if payload == 0 { payload = onWire - 40 }
        var next = bytes[start + 6]
        var at = start + 40
        var left = payload
        // Extension headers: hop-by-hop, routing, destination options, fragment, authentication.
        while next != 6 {
            guard at + 8 <= bytes.count else { return nil }
            let length: Int
            switch next {
            case 0, 43, 60, 135, 139, 140: length = (Int(bytes[at + 1]) + 1) * 8
            case 44:
                guard self.uint16(bytes, at + 2) & 0xFFF8 == 0 else { return nil }
                length = 8
            case 51: length = (Int(bytes[at + 1]) + 2) * 4
            default: return nil
            }
            next = bytes[at]
            at += length
            left -= length
        }
        let source = Array(bytes[(start + 8)..<(start + 24)])
        let destination = Array(bytes[(start + 24)..<(start + 40)])
        return self.tcp(bytes, at, left: left, ipLength: payload + 40, source, destination)
    }

    /// The TCP header at `at`, with `left` bytes of the IP packet from there on.
    static func tcp(_ bytes: [UInt8], _ at: Int, left: Int, ipLength: Int, _ source: [UInt8], _ destination: [UInt8])
        -> CapturedSegment?
    {
        guard bytes.count >= at + 14 else { return nil }
        let headerLength = Int(bytes[at + 12] >> 4) * 4
        guard headerLength >= 20, left >= headerLength else { return nil }
        let flags = Flags(rawValue: bytes[at + 13] & 0x17)
        return CapturedSegment(
            source: Endpoint(address: source, port: self.uint16(bytes, at)),
            destination: Endpoint(address: destination, port: self.uint16(bytes, at + 2)),
            sequence: self.uint32(bytes, at + 4),
            acknowledgement: self.uint32(bytes, at + 8),
            flags: flags,
            payloadLength: left - headerLength,
            ipLength: ipLength,
            window: bytes.count >= at + 16 ? self.uint16(bytes, at + 14) : nil,
            windowScale: flags.contains(.syn)
                ? self.windowScale(bytes, from: at + 20, to: min(at + headerLength, bytes.count)) : nil)
    }

    /// The window scale option (kind 3) among a SYN's options, if captured.
    static func windowScale(_ bytes: [UInt8], from start: Int, to end: Int) -> UInt8? {
        var at = start
        while at < end {
            switch bytes[at] {
            case 0: return nil
            case 1: at += 1
            default:
                guard at + 1 < end, bytes[at + 1] >= 2 else { return nil }
                if bytes[at] == 3, bytes[at + 1] == 3, at + 2 < end { return min(bytes[at + 2], 14) }
                at += Int(bytes[at + 1])
            }
        }
        return nil
    }

    static func uint16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1])
    }

    static func uint32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(self.uint16(bytes, at)) << 16 | UInt32(self.uint16(bytes, at + 2))
    }
}
