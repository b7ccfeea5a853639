import NetcondCore
import Testing

@testable import NetcondPacket

/// An IPv6-only run's NAT64: the cage's IPv6 packets to the prefix become the IPv4 packets the
/// gateway sends on, and the servers' answers come back as IPv6, each with checksums a receiver takes.
@Suite struct NAT64Tests {
    static let cage: [UInt8] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    static let server: [UInt8] = [127, 110, 1, 5]

    static func ipv6(next: UInt8, _ transport: [UInt8], hopLimit: UInt8 = 64) -> [UInt8] {
        [0x60, 0x00, 0x00, 0x00, UInt8(transport.count >> 8), UInt8(transport.count & 0xff), next, hopLimit]
            + Self.cage + IPv6OnlySpec().synthesized(Self.server) + transport
    }

    static func tcpSYN() -> [UInt8] {
        // 40000 → 80, seq 1000, SYN, an MSS option of 1440; checksum left wrong (an offload's partial sum).
        [0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0x60, 0x02, 0xff, 0xff, 0x12, 0x34, 0, 0]
            + [2, 4, 0x05, 0xa0]
    }

    /// The one's-complement sum of a transport with its pseudo-header is 0xffff when its checksum is right.
    static func checksumHolds(_ transport: [UInt8], pseudo: [UInt8], protocol next: UInt8) -> Bool {
        var sum = NAT64.sum(transport[...])
        if next != 1 {
            sum += NAT64.sum(pseudo[...]) + UInt32(next) + UInt32(transport.count)
        }
        return NAT64.checksum(sum) == 0
    }

    @Test func aCageTCPPacketGoesOnAsIPv4FromItsPoolAddressAndTheAnswerComesBackAsIPv6() throws {
        var nat64 = NAT64(spec: IPv6OnlySpec(), slot: 0x1234)
        let packet = Self.ipv6(next: 6, Self.tcpSYN())
        let converted = nat64.toIPv4(packet)
        let translated = try #require(converted)
        let pool = NAT64.pool(slot: 0x1234)
        #expect(pool == [127, 0x84, 0x8d, 0x00])
        #expect(nat64.poolBlock == "127.132.141.0/26")
        #expect(translated.count == 20 + 24)
        #expect(translated[0] == 0x45 && translated[6] == 0x40 && translated[8] == 63 && translated[9] == 6)
        #expect(Array(translated[12..<16]) == [127, 0x84, 0x8d, 1])
        #expect(Array(translated[16..<20]) == Self.server)
        #expect(NAT64.checksum(NAT64.sum(translated[0..<20])) == 0, "the IPv4 header's checksum")
        let tcp = Array(translated[20...])
        #expect(Array(tcp[0..<4]) == [0x9c, 0x40, 0, 80] && Array(tcp[20...]) == [2, 4, 0x05, 0xa0])
        #expect(Self.checksumHolds(tcp, pseudo: Array(translated[12..<20]), protocol: 6))

        // The server's SYN-ACK, to the pool address.
        var answer: [UInt8] = [0x45, 0x10, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0] + Self.server + translated[12..<16]
        answer += [0, 80, 0x9c, 0x40, 0, 0, 0x13, 0x88, 0, 0, 0x03, 0xe9, 0x50, 0x12, 0xff, 0xff, 0, 0, 0, 0]
        #expect(nat64.isPool(answer[16..<20]))
        let back = try #require(nat64.toIPv6(answer))
        #expect(back.count == 40 + 20)
        #expect(back[0] == 0x61 && back[1] == 0x00, "the traffic class kept")
        #expect(back[6] == 6 && back[7] == 63)
        #expect(Array(back[8..<24]) == IPv6OnlySpec().synthesized(Self.server))
        #expect(Array(back[24..<40]) == Self.cage)
        #expect(Self.checksumHolds(Array(back[40...]), pseudo: Array(back[8..<40]), protocol: 6))
    }

    @Test func aPingCrossesAsICMPEchoBothWays() throws {
        var nat64 = NAT64(spec: IPv6OnlySpec(), slot: 7)
        let echo = Self.ipv6(next: 58, [128, 0, 0, 0, 0, 1, 0, 2] + Array("ping".utf8))
        let converted = nat64.toIPv4(echo)
        let translated = try #require(converted)
        #expect(translated[9] == 1 && translated[20] == 8)
        #expect(Self.checksumHolds(Array(translated[20...]), pseudo: [], protocol: 1))
        var reply = translated
        reply.replaceSubrange(12..<20, with: Array(translated[16..<20]) + Array(translated[12..<16]))
        reply[20] = 0
        let back = try #require(nat64.toIPv6(reply))
        #expect(back[6] == 58 && back[40] == 129)
        #expect(Self.checksumHolds(Array(back[40...]), pseudo: Array(back[8..<40]), protocol: 58))
    }

    @Test func aUDPDatagramKeepsItsPortsAndGetsAChecksumThatIsNeverZero() throws {
        var nat64 = NAT64(spec: IPv6OnlySpec(), slot: 1)
        let udp: [UInt8] = [0x9c, 0x41, 0, 53, 0, 12, 0, 0] + [1, 2, 3, 4]
        let converted = nat64.toIPv4(Self.ipv6(next: 17, udp))
        let translated = try #require(converted)
        #expect(Array(translated[20..<24]) == [0x9c, 0x41, 0, 53])
        #expect(translated[26] != 0 || translated[27] != 0)
        #expect(Self.checksumHolds(Array(translated[20...]), pseudo: Array(translated[12..<20]), protocol: 17))
    }

    @Test func whatItDoesNotTranslateIsRefused() {
        var nat64 = NAT64(spec: IPv6OnlySpec(), slot: 1)
        // An extension header (hop-by-hop), a hop limit at its end, another prefix, a length that lies.
        #expect(nat64.translatedForTests(Self.ipv6(next: 0, [6, 0, 0, 0, 0, 0, 0, 0] + Self.tcpSYN())) == nil)
        #expect(nat64.translatedForTests(Self.ipv6(next: 6, Self.tcpSYN(), hopLimit: 1)) == nil)
        var elsewhere = Self.ipv6(next: 6, Self.tcpSYN())
        elsewhere[25] = 0x65
        #expect(nat64.translatedForTests(elsewhere) == nil)
        var lying = Self.ipv6(next: 6, Self.tcpSYN())
        lying[5] = 200
        #expect(nat64.translatedForTests(lying) == nil)
        // An ICMPv6 error (destination unreachable) is not carried.
        #expect(nat64.translatedForTests(Self.ipv6(next: 58, [1, 4, 0, 0, 0, 0, 0, 0])) == nil)
        // IPv4: to a pool address no cage address stands for, a fragment, one not to the pool.
        _ = nat64.toIPv4(Self.ipv6(next: 6, Self.tcpSYN()))
        let pool = NAT64.pool(slot: 1)
        var answer: [UInt8] = [0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0] + Self.server
        answer += [pool[0], pool[1], pool[2], pool[3] | 2] + [0, 53, 0x9c, 0x41, 0, 8, 0, 0]
        #expect(nat64.toIPv6(answer) == nil)
        answer[19] = pool[3] | 1
        #expect(nat64.toIPv6(answer) != nil)
        var fragment = answer
        fragment[6] = 0x20
        #expect(nat64.toIPv6(fragment) == nil)
        var other = answer
        other[17] = 0
        #expect(nat64.toIPv6(other) == nil)
        #expect(nat64.toIPv6(Array(answer.prefix(19))) == nil)
    }

    @Test func aRunGivesEachCageAddressAPoolAddressOfItsOwnUpTo63() {
        var nat64 = NAT64(spec: IPv6OnlySpec(), slot: 0xffff)
        #expect(NAT64.pool(slot: 0xffff) == [127, 0xbf, 0xff, 0xc0])
        var seen = Set<[UInt8]>()
        for index in 0..<63 {
            let address = nat64.poolAddress(for: [0xfd] + [UInt8](repeating: 0, count: 14) + [UInt8(index)])
            #expect(address != nil && nat64.isPool(address![...]))
            seen.insert(address!)
        }
        #expect(seen.count == 63)
        let full = nat64.poolAddress(for: [0xfe] + [UInt8](repeating: 0, count: 15))
        #expect(full == nil)
        let known = nat64.poolAddress(for: [0xfd] + [UInt8](repeating: 0, count: 14) + [5])
        #expect(known != nil, "a known one keeps its")
        // Another run's pool is not this one's.
        #expect(!nat64.isPool(NAT64.pool(slot: 0xfffe)[...]))
    }

    @Test func theFuzzEntryTranslatesBothWaysWithoutTrapping() {
        #expect(translateNAT64(Self.ipv6(next: 6, Self.tcpSYN())) > 0)
        for length in 0..<64 { _ = translateNAT64([UInt8](repeating: 0x45, count: length)) }
        _ = translateNAT64([0x60] + [UInt8](repeating: 0xff, count: 60))
    }
}

extension NAT64 {
    /// ``toIPv4(_:)`` on a copy: what an expectation can call.
    func translatedForTests(_ packet: [UInt8]) -> [UInt8]? {
        var copy = self
        return copy.toIPv4(packet)
    }
}
