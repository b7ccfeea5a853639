import NetcondCore
import Testing

@testable import NetcondPacket

/// A closed portal's gate on hand-built packets leaving the cage: which new connections it resets
/// or swallows, and what it lets through (plain HTTP for the NAT, DNS, the portal itself, packets
/// of connections made before it closed).
@Suite struct CaptiveGateTests {
    static let client: [UInt8] = [127, 0, 0, 1]
    static let origin: [UInt8] = [127, 110, 0, 1]
    static let portal: [UInt8] = [127, 110, 0, 2]
    static let loopback6 = [UInt8](repeating: 0, count: 15) + [1]

    static func gate(_ https: CaptiveHTTPSBehaviour) -> PacketCaptiveGate {
        PacketCaptiveGate(
            https: https,
            portal: [.init(address: Self.portal, port: nil), .init(address: Self.loopback6, port: 40123)]
        ) { _, _ in }
    }

    /// An IPv4 packet's head of protocol `proto` to `destination`:`port` (ICMP: `port` is the type).
    static func ipv4(proto: UInt8, to destination: [UInt8], port: UInt16, flags: UInt8 = 0) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 40)
        bytes[0] = 0x45
        bytes[9] = proto
        bytes.replaceSubrange(12..<16, with: Self.client)
        bytes.replaceSubrange(16..<20, with: destination)
        bytes[20] = proto == 1 ? UInt8(port) : 0x9c
        bytes[21] = 0x40
        bytes[22] = UInt8(port >> 8)
        bytes[23] = UInt8(port & 0xff)
        bytes[32] = 5 << 4
        bytes[33] = flags
        return bytes
    }

    static func ipv6UDP(to destination: [UInt8], port: UInt16) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 48)
        bytes[0] = 0x60
        bytes[6] = 17
        bytes.replaceSubrange(8..<24, with: Self.loopback6)
        bytes.replaceSubrange(24..<40, with: destination)
        bytes[42] = UInt8(port >> 8)
        bytes[43] = UInt8(port & 0xff)
        return bytes
    }

    static func decide(_ gate: PacketCaptiveGate, _ bytes: [UInt8]) -> PacketCaptiveGate.Stop? {
        bytes.withUnsafeBufferPointer { buffer in
            let tcp = TCPHeader(buffer.baseAddress!, copied: bytes.count, length: bytes.count)
            return gate.decide(buffer.baseAddress!, copied: bytes.count, tcp: tcp)
        }
    }

    static let syn = TCPHeader.syn

    @Test func aNewConnectionPastThePortalMeetsItsHTTPSBehaviour() {
        let https = Self.ipv4(proto: 6, to: Self.origin, port: 443, flags: Self.syn)
        #expect(Self.decide(Self.gate(.reset), https) == .reset)
        #expect(Self.decide(Self.gate(.blackhole), https) == .drop)
        // The NAT sent it to the portal's certificate: it passes the gate.
        #expect(Self.decide(Self.gate(.wrongCertificate), https) == nil)
        #expect(
            Self.decide(Self.gate(.reset), Self.ipv4(proto: 6, to: Self.origin, port: 5432, flags: Self.syn)) == .reset)
    }

    @Test func plainHTTPDNSThePortalAndConnectionsUnderWayPass() {
        let gate = Self.gate(.reset)
        #expect(Self.decide(gate, Self.ipv4(proto: 6, to: Self.origin, port: 80, flags: Self.syn)) == nil)
        #expect(Self.decide(gate, Self.ipv4(proto: 6, to: Self.origin, port: 53, flags: Self.syn)) == nil)
        #expect(Self.decide(gate, Self.ipv4(proto: 6, to: Self.portal, port: 8443, flags: Self.syn)) == nil)
        // Made before the portal closed: its packets carry ACK.
        #expect(Self.decide(gate, Self.ipv4(proto: 6, to: Self.origin, port: 443, flags: TCPHeader.ackFlag)) == nil)
        #expect(Self.decide(gate, Self.ipv4(proto: 17, to: Self.origin, port: 53)) == nil)
    }

    @Test func udpAndPingsAreLostButNotThePortals() {
        let gate = Self.gate(.wrongCertificate)
        #expect(Self.decide(gate, Self.ipv4(proto: 17, to: Self.origin, port: 443)) == .drop)
        #expect(Self.decide(gate, Self.ipv4(proto: 17, to: Self.portal, port: 9)) == nil)
        #expect(Self.decide(gate, Self.ipv4(proto: 1, to: Self.origin, port: 8)) == .drop)
        #expect(Self.decide(gate, Self.ipv4(proto: 1, to: Self.origin, port: 0)) == nil)  // an echo reply
        #expect(Self.decide(gate, Self.ipv6UDP(to: Self.loopback6, port: 40123)) == nil)
        #expect(Self.decide(gate, Self.ipv6UDP(to: Self.loopback6, port: 40124)) == .drop)
    }

    @Test func targetsAreNamedForThePortalsLog() {
        let bytes = Self.ipv4(proto: 6, to: Self.origin, port: 443, flags: Self.syn)
        let text = bytes.withUnsafeBufferPointer { buffer in
            PacketCaptiveGate.target(
                buffer.baseAddress!, copied: bytes.count,
                tcp: TCPHeader(buffer.baseAddress!, copied: bytes.count, length: bytes.count))
        }
        #expect(text == "127.110.0.1:443")
        #expect(PacketAddress.text(Self.loopback6) == "[0:0:0:0:0:0:0:1]")
    }
}
