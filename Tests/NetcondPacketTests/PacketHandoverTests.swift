import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// A handover under the packet engine, without root: the TCP connection open at the moment loses
/// every packet after it, either way, and no reset is sent; during the gap nothing is carried;
/// after it a new connection meets the new profile's link. UDP goes on (it leaves from the new
/// network).
@Suite struct PacketHandoverTests {
    typealias Routes = PacketRouteTests

    @Test func theOpenConnectionIsStrandedAndANewOneMeetsTheNewLinkAfterTheGap() throws {
        let wifi = try PacketLinkDriverTests.profile("link: {latency: 10ms}")
        var cellular = try PacketLinkDriverTests.profile("link: {latency: 50ms}")
        cellular.name = "cellular"
        var driver = PacketLinkDriver(profile: wifi, seed: 1)
        let far = Routes.other
        #expect(Routes.admit(&driver, Routes.packet(up: true, far: far), up: true, id: 1, at: 0))
        let synAck = Routes.packet(up: false, far: far, flags: TCPHeader.syn | TCPHeader.ackFlag)
        #expect(Routes.admit(&driver, synAck, up: false, id: 2, at: 20))
        #expect(Routes.fates(&driver, upTo: 100) == [1: 10, 2: 30])
        driver.control(.handover(cellular, gap: .seconds(2)), at: PacketLinkDriverTests.ms(1000))
        #expect(driver.summary.connectionsStranded == 1)
        // A new connection during the gap meets the blackhole; after it, the new link.
        let early = Routes.packet(up: true, far: far, cagePort: 40_001)
        #expect(!Routes.admit(&driver, early, up: true, id: 5, at: 1500))
        let late = Routes.packet(up: true, far: far, cagePort: 40_002)
        #expect(Routes.admit(&driver, late, up: true, id: 6, at: 3500))
        // UDP from the same port goes on: it leaves from the new network.
        let datagram = Routes.packet(up: true, far: far, flags: nil, payload: [7])
        #expect(Routes.admit(&driver, datagram, up: true, id: 7, at: 3500))
        // The stranded connection's packets, either way, go nowhere; no reset is due.
        let data = Routes.packet(up: true, far: far, flags: TCPHeader.ackFlag, seq: 1001, payload: [1, 2, 3])
        #expect(!Routes.admit(&driver, data, up: true, id: 3, at: 4000))
        let answer = Routes.packet(up: false, far: far, flags: TCPHeader.ackFlag, payload: [4])
        #expect(!Routes.admit(&driver, answer, up: false, id: 4, at: 4000))
        #expect(driver.dueReset(upTo: PacketLinkDriverTests.ms(10_000)) == nil)
        // A SYN from the stranded connection's port starts a new connection, which goes through.
        #expect(Routes.admit(&driver, Routes.packet(up: true, far: far), up: true, id: 8, at: 4000))
        #expect(Routes.fates(&driver, upTo: 5000) == [6: 3550, 7: 3550, 8: 4050])
        #expect(driver.timeline.profile.name == "cellular" && driver.timeline.state.outage == nil)
    }
}

/// A connection still in its handshake at the handover: its SYN sent again stays stranded (the
/// stream engine keeps it so too); a new connection from that port, with a SYN of its own, goes.
@Suite struct PacketHandoverHandshakeTests {
    typealias Routes = PacketRouteTests

    @Test func aStrandedHandshakesOwnSYNStaysStrandedAndANewOneGoes() throws {
        var driver = PacketLinkDriver(profile: try PacketLinkDriverTests.profile("link: {latency: 10ms}"), seed: 1)
        let far = Routes.other
        #expect(Routes.admit(&driver, Routes.packet(up: true, far: far, seq: 5000), up: true, id: 1, at: 0))
        #expect(Routes.fates(&driver, upTo: 100) == [1: 10])
        driver.control(.handover(driver.timeline.profile, gap: .zero), at: PacketLinkDriverTests.ms(200))
        #expect(driver.summary.connectionsStranded == 1)
        #expect(!Routes.admit(&driver, Routes.packet(up: true, far: far, seq: 5000), up: true, id: 2, at: 1000))
        #expect(Routes.admit(&driver, Routes.packet(up: true, far: far, seq: 9000), up: true, id: 3, at: 1500))
        #expect(Routes.fates(&driver, upTo: 3000) == [3: 1510])
    }
}
