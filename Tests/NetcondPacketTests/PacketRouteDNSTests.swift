import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// What the packet engine reads of DNS for its routes: answers over TCP as over UDP, and a route's
/// `dns_delay` met by a look-up of a name the route's hosts name (as in the stream engine), not by
/// whatever route the resolver's address takes.
@Suite struct PacketRouteDNSTests {
    typealias Routes = PacketRouteTests

    /// `message` in one TCP segment from 127.0.0.53:53 to the cage, with its two-byte length
    /// (`claimed`: another length, for a message split over segments).
    static func tcpAnswer(_ message: [UInt8], claimed: Int? = nil) -> [UInt8] {
        let length = claimed ?? message.count
        return Routes.packet(
            up: false, far: [127, 0, 0, 53], farPort: 53, flags: TCPHeader.ackFlag,
            payload: [UInt8(length >> 8), UInt8(length & 0xff)] + message)
    }

    @Test func anAnswerOverTCPIsLearntWhenTheSegmentHoldsItWhole() throws {
        var driver = try Routes.driver("  - {match: {host: \"*.cdn.netcond.test\"}, link: {latency: 150ms}}")
        let message = Routes.dnsMessage("img.cdn.netcond.test", cname: "edge.example", address: [127, 0, 0, 9])
        // Split over segments (its length says more than this one holds): not read.
        let first = Self.tcpAnswer(message, claimed: message.count + 40)
        #expect(first.withUnsafeBufferPointer { dnsAnswerAddresses($0) }.isEmpty)
        #expect(Routes.admit(&driver, first, up: false, id: 1, at: 0))
        #expect(driver.names.name(for: [127, 0, 0, 9]) == nil)
        #expect(Routes.admit(&driver, Self.tcpAnswer(message), up: false, id: 2, at: 0))
        #expect(driver.names.name(for: [127, 0, 0, 9]) == "img.cdn.netcond.test")
        #expect(Routes.admit(&driver, Routes.packet(up: true, far: [127, 0, 0, 9]), up: true, id: 3, at: 100))
        #expect(Routes.fates(&driver, upTo: 1000)[3] == 270)
    }

    @Test func aLookUpMeetsTheDNSDelayOfTheRouteThatNamesIt() throws {
        // The route names the CDN on port 443 only: the look-up has no port, and meets its delay.
        var driver = try Routes.driver(
            """
              - match: {host: "cdn.netcond.test", port: 443}
                dns_delay: 300ms
              - match: {address: 127.0.0.53/32}
                link: {latency: 100ms}
            """, access: "link: {latency: 20ms}\ndns_delay: 10ms")
        // Both queries go to the resolver at 127.0.0.53: its route carries them (100 ms more), and
        // the name looked up decides the DNS delay: the access link's, and the CDN route's.
        let cdn = DNSFailureTests.query("cdn.netcond.test")
        let other = DNSFailureTests.query("other.netcond.test")
        #expect(Routes.admit(&driver, cdn, up: true, id: 1, at: 0))
        #expect(Routes.admit(&driver, other, up: true, id: 2, at: 0))
        #expect(Routes.fates(&driver, upTo: 2000) == [1: 430, 2: 130])
    }
}
