/// Which connections a route takes: every key given must hold (host, address, port, protocol);
/// a key with a list holds when any entry does. An empty match takes every connection.
///
/// ```yaml
/// match: {host: "*.cdn.netcond.test"}                    # a name the client asked for (globs)
/// match: {address: [127.0.0.2/32, "::1/128"], port: 8000-8100, protocol: tcp}
/// ```
/// The proxy matches the name the client asked for (an HTTP request's host, CONNECT, SOCKS5, a
/// forward's upstream) and the address when it asked for one; the packet engine matches the
/// address and port a packet goes to, and names through the DNS answers the client received.
public struct RouteMatch: Sendable, Equatable {
    /// Host name globs (`*` any run of characters), kept lower-case.
    public var hosts: [String]
    public var addresses: [AddressBlock]
    public var ports: [ClosedRange<Int>]
    public var transport: Transport?

    public init(
        hosts: [String] = [], addresses: [AddressBlock] = [], ports: [ClosedRange<Int>] = [],
        transport: Transport? = nil
    ) {
        self.hosts = hosts.map { $0.lowercased() }
        self.addresses = addresses
        self.ports = ports
        self.transport = transport
    }

    /// The transport protocol a route may be limited to.
    public enum Transport: String, Sendable, Equatable, CaseIterable {
        case tcp
        case udp
    }

    /// Whether a connection to `target` is this route's.
    public func matches(_ target: RouteTarget) -> Bool {
        if let transport = self.transport, transport != target.transport { return false }
        if !self.ports.isEmpty, !self.ports.contains(where: { $0.contains(target.port) }) { return false }
        if !self.addresses.isEmpty {
            guard let address = target.address, self.addresses.contains(where: { $0.contains(address) }) else {
                return false
            }
        }
        if !self.hosts.isEmpty {
            guard let host = target.host?.lowercased(), self.hosts.contains(where: { Glob.matches($0, host) }) else {
                return false
            }
        }
        return true
    }

    /// The match as a profile writes it (for `netcond profiles show`, the control API, reports).
    public var description: String {
        var parts: [String] = []
        if !self.hosts.isEmpty { parts.append("host " + self.hosts.joined(separator: ", ")) }
        if !self.addresses.isEmpty {
            parts.append("address " + self.addresses.map(\.description).joined(separator: ", "))
        }
        if !self.ports.isEmpty {
            let ports = self.ports.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }
            parts.append("port " + ports.joined(separator: ", "))
        }
        if let transport = self.transport { parts.append(transport.rawValue) }
        return parts.isEmpty ? "every connection" : parts.joined(separator: ", ")
    }
}

/// Where a connection goes, as far as an engine knows it.
public struct RouteTarget: Sendable, Equatable {
    /// The name the client asked for (nil: it asked for an address, or the engine does not know one).
    public var host: String?
    /// The address it goes to, 4 or 16 bytes (nil: the engine does not know it yet).
    public var address: [UInt8]?
    public var port: Int
    public var transport: RouteMatch.Transport

    public init(host: String? = nil, address: [UInt8]? = nil, port: Int, transport: RouteMatch.Transport = .tcp) {
        self.host = host
        self.address = address
        self.port = port
        self.transport = transport
    }

    /// A target named by text: an IPv4 or IPv6 literal is an address, anything else a host name.
    public init(named name: String, port: Int, transport: RouteMatch.Transport = .tcp) {
        if let address = AddressBlock.parseAddress(name) {
            self.init(address: address, port: port, transport: transport)
        } else {
            self.init(host: name, port: port, transport: transport)
        }
    }
}

/// A block of addresses in CIDR notation (`127.0.0.2/32`, `10.1.0.0/16`, `::1/128`); a bare
/// address is its own /32 or /128.
public struct AddressBlock: Sendable, Hashable, CustomStringConvertible {
    /// The block's first address (bits past the prefix are zero), 4 or 16 bytes.
    public let base: [UInt8]
    public let prefix: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = Self.parseAddress(String(parts[0])) else { return nil }
        let bits = address.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value), !parts[1].hasPrefix("+") else { return nil }
            prefix = value
        }
        self.init(base: address, prefix: prefix)
    }

    public init(base: [UInt8], prefix: Int) {
        self.prefix = prefix
        self.base = Self.masked(base, prefix: prefix)
    }

    public func contains(_ address: [UInt8]) -> Bool {
        guard address.count == self.base.count else { return false }
        return Self.masked(address, prefix: self.prefix) == self.base
    }

    public var description: String {
        Self.format(self.base) + "/\(self.prefix)"
    }

    /// `address` with the bits past `prefix` cleared.
    public static func masked(_ address: [UInt8], prefix: Int) -> [UInt8] {
        var result = address
        for index in result.indices {
            let kept = min(max(prefix - index * 8, 0), 8)
            result[index] &= kept == 8 ? 0xff : UInt8(truncatingIfNeeded: 0xff << (8 - kept))
        }
        return result
    }

    /// An IPv4 dotted quad (4 bytes) or an IPv6 address (16 bytes; `::` shortening, an embedded
    /// IPv4 tail), or nil.
    public static func parseAddress(_ text: String) -> [UInt8]? {
        if text.contains(":") { return Self.parseIPv6(Substring(text)) }
        return Self.parseIPv4(Substring(text))
    }

    static func parseIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy(\.isASCIIDigit), let value = UInt8(part) else {
                return nil
            }
            bytes.append(value)
        }
        return bytes
    }

    static func parseIPv6(_ text: Substring) -> [UInt8]? {
        guard text.count <= 45 else { return nil }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String, allowIPv4Tail: Bool) -> [UInt8]? {
            if part.isEmpty { return [] }
            var bytes: [UInt8] = []
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, field) in fields.enumerated() {
                if allowIPv4Tail, index == fields.count - 1, field.contains(".") {
                    guard let tail = Self.parseIPv4(field) else { return nil }
                    bytes += tail
                    continue
                }
                guard (1...4).contains(field.count), field.allSatisfy(\.isHexDigit),
                    let value = UInt16(field, radix: 16)
                else { return nil }
                bytes += [UInt8(value >> 8), UInt8(value & 0xff)]
            }
            return bytes
        }
        guard let head = groups(halves[0], allowIPv4Tail: halves.count == 1) else { return nil }
        if halves.count == 1 { return head.count == 16 ? head : nil }
        guard let tail = groups(halves[1], allowIPv4Tail: true), head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }

    /// An address as text: dotted quad, or IPv6 groups with the longest run of zero groups as `::`.
    public static func format(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        guard address.count == 16 else { return address.map(String.init).joined(separator: ".") }
        let groups = (0..<8).map { UInt16(address[2 * $0]) << 8 | UInt16(address[2 * $0 + 1]) }
        var best = (start: -1, length: 0)
        var run = (start: -1, length: 0)
        for (index, group) in groups.enumerated() {
            if group == 0 {
                run = run.start < 0 ? (index, 1) : (run.start, run.length + 1)
                if run.length > best.length { best = run }
            } else {
                run = (-1, 0)
            }
        }
        let hex = groups.map { String($0, radix: 16) }
        guard best.length >= 2 else { return hex.joined(separator: ":") }
        let head = hex[..<best.start].joined(separator: ":")
        let tail = hex[(best.start + best.length)...].joined(separator: ":")
        return head + "::" + tail
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { self.isASCII && self.isNumber }
}
