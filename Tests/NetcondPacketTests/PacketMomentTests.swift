import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// What the packet engine sends in a server's place takes the delay of its moment: under a step
/// series whose delay goes from 50 ms to 400 ms each way at 10 s, a refusal's reset, a cut's
/// resets and a `dns_fail` answer after the step are 400 ms-based, not the first row's 50 ms.
@Suite struct PacketMomentTests {
    static let series = "link: {trace: {source: slower, series: \"0, 1000mbit, 50ms, 0%; 10, 1000mbit, 400ms, 0%\"}}"

    static func driver(_ extra: String = "") throws -> PacketLinkDriver {
        PacketLinkDriver(profile: try PacketLinkDriverTests.profile(Self.series + "\n" + extra), seed: 1)
    }

    @Test func aRefuseOutagesResetComesOneRoundTripInForceLater() throws {
        var driver = try Self.driver()
        driver.control(.outage(.refuse), at: PacketLinkDriverTests.ms(20_000))
        let syn = PacketLinkDriverTests.tcp(up: true, flags: TCPHeader.syn)
        #expect(!PacketLinkDriverTests.admit(&driver, syn, up: true, at: 20_000))
        let due1 = driver.dueReset(upTo: PacketLinkDriverTests.ms(20_799))
        #expect(due1 == nil)
        let due2 = driver.dueReset(upTo: PacketLinkDriverTests.ms(20_800))
        #expect(try #require(due2).answersSYN)
    }

    @Test func theFirewallsResetComesOneRoundTripInForceLater() throws {
        var driver = try Self.driver("firewall: {allow_ports: [443], otherwise: refuse}")
        let syn = PacketLinkDriverTests.tcp(up: true, flags: TCPHeader.syn)
        #expect(!PacketLinkDriverTests.admit(&driver, syn, up: true, at: 20_000))
        let due3 = driver.dueReset(upTo: PacketLinkDriverTests.ms(20_799))
        #expect(due3 == nil)
        let due4 = driver.dueReset(upTo: PacketLinkDriverTests.ms(20_800))
        #expect(due4 != nil)
    }

    @Test func aCutsResetsTakeEachDirectionsDelayInForce() throws {
        var driver = try Self.driver()
        let syn = PacketLinkDriverTests.tcp(up: true, flags: TCPHeader.syn)
        #expect(PacketLinkDriverTests.admit(&driver, syn, up: true, at: 19_000))
        let synAck = PacketLinkDriverTests.tcp(up: false, flags: TCPHeader.syn | TCPHeader.ackFlag, seq: 5000)
        #expect(PacketLinkDriverTests.admit(&driver, synAck, up: false, id: 2, at: 19_500))
        while let (direction, delivery) = driver.popDelivery(upTo: PacketLinkDriverTests.ms(20_000)) {
            driver.delivered(delivery, direction, corrupted: false)
        }
        driver.control(.cut, at: PacketLinkDriverTests.ms(20_000))
        let due5 = driver.dueReset(upTo: PacketLinkDriverTests.ms(20_399))
        #expect(due5 == nil)
        let due6 = driver.dueReset(upTo: PacketLinkDriverTests.ms(20_400))
        #expect(due6 != nil)
        let due7 = driver.dueReset(upTo: PacketLinkDriverTests.ms(20_400))
        #expect(due7 != nil)
    }

    @Test func aFailingLookupsAnswerComesOneRoundTripInForceLater() throws {
        var driver = try Self.driver("dns_delay: 100ms\ndns_fail: ['*.invalid']")
        let query = DNSFailureTests.query("api.example.invalid")
        #expect(!PacketLinkDriverTests.admit(&driver, query, up: true, at: 20_000))
        let due8 = driver.dueInjected(upTo: PacketLinkDriverTests.ms(20_899))
        #expect(due8 == nil)
        let due9 = driver.dueInjected(upTo: PacketLinkDriverTests.ms(20_900))
        #expect(due9 != nil)
    }
}
