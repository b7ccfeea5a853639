/// An IPv6-only access network with NAT64 and DNS64, as Apple requires apps to work on (and as
/// many mobile carriers run): the device has no IPv4 route at all; a name's IPv4 address comes
/// back from DNS as an IPv6 address in the NAT64 prefix (the IPv4 address in its last 32 bits,
/// RFC 6052), and the network translates packets to such an address to the IPv4 server behind it.
/// A client that connects to an IPv4 literal, or asks only for A records, fails there; one that
/// uses names and any address family passes.
///
/// Only the packet engine builds it (a proxy never sees how the client opens its sockets).
public struct IPv6OnlySpec: Sendable, Equatable {
    /// The NAT64 prefix's 96 bits (12 bytes): 64:ff9b:: (RFC 6052's well-known prefix) unless the
    /// profile names a network-specific one.
    public var prefix: [UInt8]

    public init(prefix: [UInt8] = IPv6OnlySpec.wellKnownPrefix) {
        self.prefix = prefix
    }

    /// `64:ff9b::/96`.
    public static let wellKnownPrefix: [UInt8] = [0x00, 0x64, 0xff, 0x9b] + [UInt8](repeating: 0, count: 8)

    /// The IPv6 address a DNS64 resolver gives for an IPv4 address (4 bytes): the prefix, then it.
    public func synthesized(_ ipv4: [UInt8]) -> [UInt8] {
        self.prefix + ipv4.prefix(4)
    }

    /// The IPv4 address inside an IPv6 address (16 bytes) of the prefix; nil for any other.
    public func embedded(_ ipv6: [UInt8]) -> [UInt8]? {
        guard ipv6.count == 16, ipv6.prefix(12).elementsEqual(self.prefix) else { return nil }
        return Array(ipv6.suffix(4))
    }

    /// The synthesized address as text (`64:ff9b::7f6e:105`) for a dotted IPv4 address; nil when
    /// `ipv4` is not one.
    public func synthesized(text ipv4: String) -> String? {
        guard let bytes = AddressBlock.parseAddress(ipv4), bytes.count == 4 else { return nil }
        return AddressBlock.format(self.synthesized(bytes))
    }

    /// `64:ff9b::/96`.
    public var prefixDescription: String {
        AddressBlock.format(self.prefix + [0, 0, 0, 0]) + "/96"
    }

    static let keys = ["nat64_prefix"]
    static let expecting = "true, false, or a mapping such as {nat64_prefix: 64:ff9b::/96}"

    /// `ipv6_only: true` (the well-known prefix), `false` (nil: a file turning off what it
    /// extends), or `{nat64_prefix: 2001:db8:64::/96}`.
    static func decode(_ node: ConfigNode) throws(ConfigError) -> IPv6OnlySpec? {
        if node.node.scalar != nil, !node.isNull {
            return try node.choice(["true", "false"]) == "true" ? IPv6OnlySpec() : nil
        }
        let map = try node.mapping(allowedKeys: Self.keys, expecting: Self.expecting)
        guard let prefixNode = map["nat64_prefix"] else { return IPv6OnlySpec() }
        return IPv6OnlySpec(prefix: try Self.prefix(prefixNode))
    }

    /// A NAT64 prefix: an IPv6 /96 that is no special block the device uses for itself.
    private static func prefix(_ node: ConfigNode) throws(ConfigError) -> [UInt8] {
        let text = try node.string(expecting: "an IPv6 prefix of 96 bits such as 64:ff9b::/96")
        let allowed = "allowed: an IPv6 /96 such as 64:ff9b::/96 (the well-known prefix) or 2001:db8:64::/96"
        guard let block = AddressBlock(text), block.base.count == 16 else {
            throw node.error("'\(text)' is not an IPv6 prefix; \(allowed)")
        }
        guard block.prefix == 96, text.contains("/") else {
            throw node.error(
                "'\(text)' is not a /96: netcond puts the IPv4 address in the last 32 bits (RFC 6052's /96 form); \(allowed)"
            )
        }
        let head = Array(block.base.prefix(12))
        let special: [(String, [UInt8], Int)] = [
            ("IPv4-mapped (::ffff:0:0/96)", [UInt8](repeating: 0, count: 10) + [0xff, 0xff], 96),
            ("the unspecified or loopback block (::/96)", [UInt8](repeating: 0, count: 12), 96),
            ("multicast (ff00::/8)", [0xff], 8),
            ("link-local (fe80::/10)", [0xfe, 0x80], 10),
        ]
        for (name, base, bits) in special
        where AddressBlock(base: base + [UInt8](repeating: 0, count: 16 - base.count), prefix: bits).contains(
            block.base)
        {
            throw node.error("'\(text)' is \(name), which a device keeps for itself; \(allowed)")
        }
        return head
    }
}
