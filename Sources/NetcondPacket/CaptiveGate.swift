import NetcondCore

/// A closed captive portal as the packet engine enforces it on the packets leaving the cage.
///
/// The portal's two other halves live elsewhere: plain HTTP (TCP port 80) is sent to the portal's
/// server by NAT in the cage's rules (``PacketCage/setCaptive(_:)``), and so is every other TCP
/// connection when the portal answers them with its own certificate. What is left is decided here,
/// packet by packet, for connections that start while the portal is closed:
///
/// - a TCP SYN to another port meets the portal's HTTPS behaviour: a reset one round trip later
///   (`reset`), or nothing at all (`blackhole`);
/// - UDP (QUIC, games, WebRTC) and pings are dropped;
/// - DNS (port 53, both protocols) and the portal's own addresses pass, as on a real portal's
///   network: the client can still resolve names and reach the login page.
///
/// Connections made before the portal closed go on, as they do in proxy mode.
public struct PacketCaptiveGate: Sendable {
    /// What the gate does to a packet it stops.
    public enum Stop: Sendable, Equatable {
        /// Answer the SYN with a reset, as the refusal of a connection.
        case reset
        /// Lose it.
        case drop
    }

    /// One of the portal's own endpoints: packets to it always pass. Port nil: any port.
    public struct Endpoint: Sendable, Equatable {
        var address: PacketAddress
        var port: UInt16?

        /// `address`: 4 or 16 bytes.
        public init(address: [UInt8], port: UInt16?) {
            self.address = PacketAddress(address)
            self.port = port
        }
    }

    public var https: CaptiveHTTPSBehaviour
    public var portal: [Endpoint]
    /// Told (on the engine's thread) of each connection the gate stopped, with its target as
    /// `address:port`.
    public var onStop: @Sendable (Stop, String) -> Void

    public init(https: CaptiveHTTPSBehaviour, portal: [Endpoint], onStop: @escaping @Sendable (Stop, String) -> Void) {
        self.https = https
        self.portal = portal
        self.onStop = onStop
    }

    /// What the closed portal does to a packet leaving the cage (`copied` bytes of its head at
    /// `bytes`, `tcp` its TCP header when it is TCP); nil: it passes.
    func decide(_ bytes: UnsafePointer<UInt8>, copied: Int, tcp: TCPHeader?) -> Stop? {
        if let tcp {
            // Only new connections; port 80 is the NAT's (to the portal's page), 53 is DNS.
            guard tcp.isSYN, tcp.destinationPort != 80, tcp.destinationPort != 53,
                !self.isPortal(tcp.destination, port: tcp.destinationPort)
            else { return nil }
            switch self.https {
            case .reset: return .reset
            case .blackhole: return .drop
            case .wrongCertificate: return nil  // the NAT sent it to the portal's TLS server
            }
        }
        guard let head = PacketHead(bytes, copied: copied) else { return nil }
        if head.isUDP, let port = head.destinationPort {
            return port == 53 || self.isPortal(head.destination, port: port) ? nil : .drop
        }
        if head.isEchoRequest {
            return self.isPortal(head.destination, port: nil) ? nil : .drop
        }
        return nil
    }

    private func isPortal(_ address: PacketAddress, port: UInt16?) -> Bool {
        self.portal.contains { $0.address == address && ($0.port == nil || $0.port == port) }
    }

    /// `address:port` of a packet's target, for the portal's log.
    static func target(_ bytes: UnsafePointer<UInt8>, copied: Int, tcp: TCPHeader?) -> String {
        if let tcp {
            let address = tcp.destination.bytes(count: tcp.addressLength)
            return PacketAddress.text(address) + ":" + String(tcp.destinationPort)
        }
        return PacketHead(bytes, copied: copied)?.destinationText ?? "?"
    }
}

extension PacketAddress {
    /// Dotted IPv4, or IPv6 as eight groups of hex (brackets added by the caller where a port follows).
    static func text(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        var groups: [String] = []
        for index in stride(from: 0, to: bytes.count - 1, by: 2) {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
        }
        return "[" + groups.joined(separator: ":") + "]"
    }
}
