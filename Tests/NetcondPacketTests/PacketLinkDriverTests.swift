import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// What the packet engine decides about each packet, without root or the kernel: the set-up rules,
/// an outage's refusals, the flow table, and the link path, in virtual time.
@Suite struct PacketLinkDriverTests {
    static func profile(_ yaml: String) throws -> Profile {
        try ProfileDecoder().decode(yaml: "name: t\n" + yaml, file: "Profiles/t.yaml")
    }

    /// An IPv4 TCP packet from the cage's port 40000 (up) or to it (down), 40 bytes, `flags`.
    static func tcp(up: Bool, farPort: UInt16 = 80, flags: UInt8, seq: UInt32 = 1000) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 40)
        bytes[0] = 0x45
        bytes[9] = 6
        let cage: [UInt8] = [127, 0, 0, 1], far: [UInt8] = [127, 0, 0, 2]
        bytes.replaceSubrange(12..<16, with: up ? cage : far)
        bytes.replaceSubrange(16..<20, with: up ? far : cage)
        let (source, destination) = up ? (UInt16(40_000), farPort) : (farPort, UInt16(40_000))
        bytes.replaceSubrange(
            20..<24,
            with: [UInt8(source >> 8), UInt8(source & 0xff), UInt8(destination >> 8), UInt8(destination & 0xff)])
        bytes.replaceSubrange(
            24..<28, with: [UInt8(seq >> 24), UInt8(seq >> 16 & 0xff), UInt8(seq >> 8 & 0xff), UInt8(seq & 0xff)])
        bytes[32] = 0x50
        bytes[33] = flags
        return bytes
    }

    /// Offers `bytes` at `at` (in milliseconds); true when the link took it.
    static func admit(_ driver: inout PacketLinkDriver, _ bytes: [UInt8], up: Bool, id: UInt32 = 1, at: Int64) -> Bool {
        Self.admit(&driver, bytes, up: up, id: id, at: Instant(nanoseconds: at * 1_000_000))
    }

    /// Offers `bytes` at `now`, following the timelines up to then; true when the link took it.
    static func admit(_ driver: inout PacketLinkDriver, _ bytes: [UInt8], up: Bool, id: UInt32, at now: Instant) -> Bool
    {
        driver.follow(to: now) { _ in }
        return bytes.withUnsafeBufferPointer { buffer in
            let tcp = TCPHeader(buffer.baseAddress!, copied: buffer.count, length: buffer.count)
            return driver.admit(
                HeldPacket(queue: up ? 0 : 1, id: id, mark: 0, tcp: tcp, length: UInt32(buffer.count)), up: up,
                wireLength: buffer.count, segments: 1, payload: buffer.baseAddress!, copied: buffer.count, bytes: nil,
                at: now)
        }
    }

    static func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

    @Test func aPacketCrossesAfterItsLatencyAndTheFlowTableFollowsIt() throws {
        var driver = PacketLinkDriver(profile: try Self.profile("link: {latency: 20ms}"), seed: 1)
        #expect(Self.admit(&driver, Self.tcp(up: true, flags: TCPHeader.syn), up: true, at: 0))
        let taken1 = driver.popDelivery(upTo: Self.ms(19))
        #expect(taken1 == nil)
        let taken2 = driver.popDelivery(upTo: Self.ms(20))
        let (direction, delivery) = try #require(taken2)
        #expect(direction == .up && delivery.at == Self.ms(20) && delivery.unit.id == 1)
        driver.delivered(delivery, direction, corrupted: false)
        #expect(driver.summary.connections == 1 && driver.summary.up.packets == 1 && driver.summary.up.bytes == 40)
        #expect(driver.flows.count == 1)
    }

    @Test func theFirewallRefusesASynWithAResetOneRoundTripLater() throws {
        var driver = PacketLinkDriver(
            profile: try Self.profile("link: {latency: 50ms}\nfirewall: {allow_ports: [443], otherwise: refuse}"),
            seed: 1)
        #expect(!Self.admit(&driver, Self.tcp(up: true, farPort: 80, flags: TCPHeader.syn, seq: 7), up: true, at: 10))
        #expect(driver.summary.firewallStopped == 1)
        let taken3 = driver.dueReset(upTo: Self.ms(109))
        #expect(taken3 == nil)
        let taken4 = driver.dueReset(upTo: Self.ms(110))
        let reset = try #require(taken4)
        // Toward the cage, from the far end, answering the SYN: RST|ACK with ack = seq + 1.
        #expect(reset.answersSYN && reset.ack == 8 && reset.seq == 0)
        #expect(reset.source == [127, 0, 0, 2] && reset.sourcePort == 80 && reset.destinationPort == 40_000)
        // An allowed port passes.
        #expect(Self.admit(&driver, Self.tcp(up: true, farPort: 443, flags: TCPHeader.syn), up: true, id: 2, at: 20))
    }

    @Test func aRefuseOutageTurnsSynsAwayAndABlackholeSwallowsEverything() throws {
        let profile = try Self.profile(
            """
            link: {latency: 10ms}
            schedule:
              repeat: false
              phases:
                - {name: refusing, for: 1s, outage: refuse}
                - {name: dark, for: 1s, outage: blackhole}
                - {name: on, for: 1s}
            """)
        var driver = PacketLinkDriver(profile: profile, seed: 1)
        #expect(!Self.admit(&driver, Self.tcp(up: true, flags: TCPHeader.syn), up: true, at: 100))
        #expect(driver.summary.refusedConnections == 1)
        let taken5 = driver.dueReset(upTo: Self.ms(120))
        #expect(try #require(taken5).answersSYN)
        // Data of an open connection still flows during a refuse outage.
        #expect(Self.admit(&driver, Self.tcp(up: true, flags: TCPHeader.ackFlag), up: true, at: 200))
        #expect(!Self.admit(&driver, Self.tcp(up: false, flags: TCPHeader.ackFlag), up: false, at: 1500))
        #expect(driver.summary.down.outageDrops == 1)
        #expect(Self.admit(&driver, Self.tcp(up: false, flags: TCPHeader.ackFlag), up: false, at: 2500))
    }

    @Test func theFirstConnectionsAreHeldAndASynWaitsForItsHold() throws {
        var driver = PacketLinkDriver(
            profile: try Self.profile("link: {latency: 10ms}\nconnect_hold: {for: 2s, first: 1}"), seed: 1)
        #expect(Self.admit(&driver, Self.tcp(up: true, flags: TCPHeader.syn), up: true, at: 0))
        #expect(driver.summary.connectsHeld == 1)
        // The SYN arrives when the hold ends, plus its latency.
        let taken6 = driver.popDelivery(upTo: Self.ms(2009))
        #expect(taken6 == nil)
        let taken7 = driver.popDelivery(upTo: Self.ms(2010))
        #expect(try #require(taken7).1.at == Self.ms(2010))
    }

    @Test func aLookupOfAFailingNameIsAnsweredInTheServersPlace() throws {
        var driver = PacketLinkDriver(
            profile: try Self.profile("link: {latency: 30ms}\ndns_delay: 100ms\ndns_fail: ['*.invalid']"), seed: 1)
        #expect(!Self.admit(&driver, DNSFailureTests.query("api.example.invalid"), up: true, at: 0))
        #expect(driver.lookups.map(\.name) == ["api.example.invalid"] && driver.summary.lookupsFailed == 1)
        // One round trip and the DNS delay later.
        let taken8 = driver.dueInjected(upTo: Self.ms(159))
        #expect(taken8 == nil)
        let taken9 = driver.dueInjected(upTo: Self.ms(160))
        let answer = try #require(taken9)
        #expect(answer[30] & 0x80 != 0, "a response")
        // Another name is delayed by dns_delay and passes.
        #expect(Self.admit(&driver, DNSFailureTests.query("origin.netcond.test"), up: true, at: 10))
        let taken10 = driver.popDelivery(upTo: Self.ms(1000))
        #expect(try #require(taken10).1.at == Self.ms(140))
    }

    @Test func aCutResetsBothEndsOfEveryConnectionAfterEachDirectionsLatency() throws {
        var driver = PacketLinkDriver(profile: try Self.profile("up: {latency: 10ms}\ndown: {latency: 40ms}"), seed: 1)
        #expect(Self.admit(&driver, Self.tcp(up: true, flags: TCPHeader.syn), up: true, at: 0))
        // The far end answers: the table learns the sequence numbers each end expects.
        #expect(
            Self.admit(
                &driver, Self.tcp(up: false, flags: TCPHeader.syn | TCPHeader.ackFlag, seq: 5000), up: false, id: 2,
                at: 20))
        while let (direction, delivery) = driver.popDelivery(upTo: Self.ms(100)) {
            driver.delivered(delivery, direction, corrupted: false)
        }
        driver.control(.cut, at: Self.ms(100))
        #expect(driver.summary.connectionsCut == 1)
        let taken11 = driver.dueReset(upTo: Self.ms(110))
        let first = try #require(taken11)
        #expect(first.destination == [127, 0, 0, 2], "toward the far end first: the up latency is shorter")
        let taken12 = driver.dueReset(upTo: Self.ms(139))
        #expect(taken12 == nil)
        let taken13 = driver.dueReset(upTo: Self.ms(140))
        #expect(try #require(taken13).destination == [127, 0, 0, 1])
    }

    /// The engine warms its caches before a precise moment by taking what is due off a copy of the
    /// network: the driver itself must deliver exactly what it would have.
    @Test func warmingUpBeforeAMomentChangesNothingTheDriverDelivers() throws {
        // A route's path is the second a packet crosses: taking it off the first offers it there,
        // with draws of its own (a copy must draw from a copy of the route's generator).
        let profile = try Self.profile(
            """
            link: {latency: 100ms, jitter: 20ms, loss: 20%, duplicate: 20%}
            routes:
              - name: far
                match: {port: 80}
                link: {latency: 30ms, jitter: 10ms, loss: 30%}
            """)
        var warmed = PacketLinkDriver(profile: profile, seed: 7)
        var untouched = PacketLinkDriver(profile: profile, seed: 7)
        for id in 0..<40 {
            let bytes = Self.tcp(
                up: id % 2 == 0, farPort: id % 4 < 2 ? 80 : 443, flags: TCPHeader.ackFlag, seq: UInt32(1000 + id))
            let at = Instant(nanoseconds: Int64(id) * 3_000_000)
            let taken = Self.admit(&warmed, bytes, up: id % 2 == 0, id: UInt32(id), at: at)
            #expect(taken == Self.admit(&untouched, bytes, up: id % 2 == 0, id: UInt32(id), at: at))
        }
        func described(_ event: NetworkEvent<HeldPacket>) -> String {
            switch event {
            case .delivered(let direction, let delivery):
                "\(direction) \(delivery.unit.id) at \(delivery.at.nanoseconds) copy \(delivery.isCopy)"
            case .dropped(let direction, let packet, _): "\(direction) \(packet.id) dropped"
            }
        }
        var seen: [[String]] = [[], []]
        for step in 1...30 {
            let now = Self.ms(Int64(step) * 10)
            warmed.warmUp(upTo: now + .milliseconds(5))
            while let event = warmed.popEvent(upTo: now) { seen[0].append(described(event)) }
            while let event = untouched.popEvent(upTo: now) { seen[1].append(described(event)) }
        }
        #expect(seen[0].count >= 20, "most of the 40 packets, and some copies, are delivered or dropped")
        #expect(seen[0].contains { $0.hasSuffix("dropped") }, "the route's path dropped some")
        #expect(seen[0] == seen[1])
    }
}

extension PacketLinkDriver {
    /// The next packet the network delivered by `now` (one dropped on a route's path is counted and
    /// passed over), as the engine takes them.
    mutating func popDelivery(upTo now: Instant) -> (Direction, PathDelivery<HeldPacket>)? {
        while let event = self.popEvent(upTo: now) {
            if case .delivered(let direction, let delivery) = event { return (direction, delivery) }
        }
        return nil
    }
}
