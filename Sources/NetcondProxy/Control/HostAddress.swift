import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a host as typed (`--listen`, a `Host` header, an `Origin`) says about who can reach it.
///
/// ```
///   "127.0.0.1", "127.8.0.1", "::1", "::ffff:127.0.0.1", "localhost"  → loopback
///   "0.0.0.0", "::"                                                  → every interface
///   "192.168.1.5", "fe80::1"                                         → an IP literal, not loopback
///   "evil.example", "127.0.0.1.nip.io"                               → a name: not an IP literal
/// ```
public enum HostAddress {
    /// The bytes of an IPv4 or IPv6 literal (no brackets, no zone), or nil for anything else.
    static func ipBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// True for an IPv4 or IPv6 literal (without brackets).
    public static func isIPLiteral(_ text: String) -> Bool {
        self.ipBytes(text) != nil
    }

    /// True for `localhost`, 127.0.0.0/8, `::1` and IPv4-mapped 127.0.0.0/8: addresses no other
    /// machine can send to. Any other name is not loopback (it may resolve anywhere).
    public static func isLoopback(_ host: String) -> Bool {
        let host = self.unbracketed(host)
        if host.lowercased() == "localhost" { return true }
        guard let bytes = self.ipBytes(host) else { return false }
        if bytes.count == 4 { return bytes[0] == 127 }
        let mappedPrefix: [UInt8] = Array(repeating: 0, count: 10) + [0xFF, 0xFF]
        if Array(bytes.prefix(12)) == mappedPrefix { return bytes[12] == 127 }
        return bytes == Array(repeating: 0, count: 15) + [1]
    }

    /// `[::1]` → `::1`; anything else as it is.
    static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// The host of an authority (`host`, `host:port`, `[v6]`, `[v6]:port`), lower-cased and without
    /// brackets; nil when it is malformed (an empty host, a port that is not a number).
    static func host(ofAuthority authority: String) -> String? {
        var host = Substring(authority)
        var port: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
        } else if let colon = host.lastIndex(of: ":") {
            port = host[host.index(after: colon)...]
            host = host[..<colon]
            guard !host.contains(":") else { return nil }
        }
        if let port, !port.allSatisfy({ $0.isASCII && $0.isNumber }) { return nil }
        guard !host.isEmpty else { return nil }
        return host.lowercased()
    }
}
