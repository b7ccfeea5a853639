import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// Routes under the packet engine, without root: each connection's route decided on its first
/// packet (address, port, transport, a name learnt from DNS), the route's link in series with the
/// access link, and the route's own rules, outages and live changes.
@Suite struct PacketRouteTests {
    static let cage: [UInt8] = [127, 0, 0, 1]
    static let routed: [UInt8] = [127, 0, 0, 2]
    static let other: [UInt8] = [127, 0, 0, 3]

    /// Access latency 20 ms; `routes` (YAML list items, indented for `routes:`).
    static func driver(_ routes: String, access: String = "link: {latency: 20ms}") throws -> PacketLinkDriver {
        let profile = try PacketLinkDriverTests.profile(access + "\nroutes:\n" + routes)
        return PacketLinkDriver(profile: profile, seed: 1)
    }

    /// An IPv4 packet between the cage's port `cagePort` and `far`:`farPort`, up (from the cage) or
    /// down; TCP with `flags`, or UDP (`flags` nil) with `payload`.
    static func packet(
        up: Bool, far: [UInt8], farPort: UInt16 = 80, cagePort: UInt16 = 40_000, flags: UInt8? = TCPHeader.syn,
        seq: UInt32 = 1000, payload: [UInt8] = []
    ) -> [UInt8] {
        let transportLength = flags == nil ? 8 : 20
        let total = 20 + transportLength + payload.count
        var bytes: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xff), 0, 0, 0x40, 0, 64]
        bytes += [flags == nil ? 17 : 6, 0, 0] + (up ? Self.cage + far : far + Self.cage)
        let (source, destination) = up ? (cagePort, farPort) : (farPort, cagePort)
        bytes += [UInt8(source >> 8), UInt8(source & 0xff), UInt8(destination >> 8), UInt8(destination & 0xff)]
        if let flags {
            bytes += [UInt8(seq >> 24), UInt8(seq >> 16 & 0xff), UInt8(seq >> 8 & 0xff), UInt8(seq & 0xff)]
            bytes += [0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]
        } else {
            let length = 8 + payload.count
            bytes += [UInt8(length >> 8), UInt8(length & 0xff), 0, 0]
        }
        return bytes + payload
    }

    /// Offers `bytes` at `at` ms, following the timelines up to then; true when the network took it.
    static func admit(_ driver: inout PacketLinkDriver, _ bytes: [UInt8], up: Bool, id: UInt32 = 1, at: Int64) -> Bool {
        let now = PacketLinkDriverTests.ms(at)
        driver.follow(to: now) { _ in }
        return bytes.withUnsafeBufferPointer { buffer in
            let tcp = TCPHeader(buffer.baseAddress!, copied: buffer.count, length: buffer.count)
            return driver.admit(
                HeldPacket(queue: up ? 0 : 1, id: id, mark: 0, tcp: tcp, length: UInt32(buffer.count)), up: up,
                wireLength: buffer.count, segments: 1, payload: buffer.baseAddress!, copied: buffer.count, bytes: nil,
                at: now)
        }
    }

    /// Every event up to `at` ms: packet id → its moment of delivery (ms), or -1 when dropped.
    static func fates(_ driver: inout PacketLinkDriver, upTo at: Int64) -> [UInt32: Int64] {
        var fates: [UInt32: Int64] = [:]
        func take(_ event: NetworkEvent<HeldPacket>) {
            switch event {
            case .delivered(let direction, let delivery):
                fates[delivery.unit.id] = delivery.at.nanoseconds / 1_000_000
                driver.delivered(delivery, direction, corrupted: false)
            case .dropped(_, let packet, _): fates[packet.id] = -1
            }
        }
        var events: [NetworkEvent<HeldPacket>] = []
        driver.follow(to: PacketLinkDriverTests.ms(at)) { events.append($0) }
        while let event = driver.popEvent(upTo: PacketLinkDriverTests.ms(at)) { events.append(event) }
        for event in events { take(event) }
        return fates
    }

    /// The engine publishes a copy of its summary every 50 ms and the next packet's count copies
    /// the lanes' counters whole: plain memory, or every route costs a retain and a release
    /// (`scripts/bench --only 16b` measured 0.9 µs a packet more with 1,000 routes).
    @Test func aLanesCountersHoldNoReference() {
        #expect(_isPOD(PacketSummary.LaneCounts.self))
        var summary = PacketSummary()
        summary.addLane(name: "cdn", match: "host cdn.example")
        summary.laneCounts[0][1].bytes += 10
        summary.laneCounts[0].connections += 1
        #expect(summary.lanes.map(\.name) == ["cdn"] && summary.lanes[0].match == "host cdn.example")
        #expect(
            summary.lanes[0].down.bytes == 10 && summary.lanes[0].up.bytes == 0 && summary.lanes[0].connections == 1)
    }

    @Test func aRoutesLatencyAddsToTheAccessLinks() throws {
        var driver = try Self.driver("  - {match: {address: 127.0.0.2/32}, link: {latency: 150ms}}")
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed), up: true, id: 1, at: 0))
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_001), up: true, id: 2, at: 0))
        #expect(Self.fates(&driver, upTo: 1000) == [1: 170, 2: 20])
        // The far end's answer comes down the route, then the access link.
        #expect(
            Self.admit(
                &driver, Self.packet(up: false, far: Self.routed, flags: TCPHeader.syn | TCPHeader.ackFlag), up: false,
                id: 3, at: 1000))
        #expect(Self.fates(&driver, upTo: 2000) == [3: 1170])
        #expect(driver.summary.lanes.map(\.name) == ["address 127.0.0.2/32"])
        #expect(driver.summary.lanes[0].up.packets == 1 && driver.summary.lanes[0].down.packets == 1)
        #expect(driver.summary.lanes[0].connections == 1 && driver.summary.connections == 2)
        #expect(driver.summary.up.packets == 2 && driver.summary.lanes[0].up.bytes == 40)
    }

    /// A switch to a profile with routes gives the new route a path and a lane (its `connect_hold`
    /// counted from the switch); a switch to one without keeps the connections already on it there.
    @Test func aProfileSwitchAddsRoutesAndKeepsTheConnectionsOfOnesItTakesAway() throws {
        var driver = PacketLinkDriver(profile: try PacketLinkDriverTests.profile("link: {latency: 20ms}"), seed: 1)
        let routed = try PacketLinkDriverTests.profile(
            "link: {latency: 20ms}\nroutes: [{match: {address: 127.0.0.2/32}, link: {latency: 150ms}, connect_hold: 1s}]"
        )
        driver.control(.switchProfile(routed), at: PacketLinkDriverTests.ms(100))
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed), up: true, id: 1, at: 100))
        // The hold, then both links.
        #expect(Self.fates(&driver, upTo: 2000) == [1: 1270])
        #expect(driver.summary.lanes.count == 1 && driver.summary.lanes[0].connectsHeld == 1)
        driver.control(
            .switchProfile(try PacketLinkDriverTests.profile("link: {latency: 20ms}")),
            at: PacketLinkDriverTests.ms(2000))
        let data = Self.packet(up: true, far: Self.routed, flags: TCPHeader.ackFlag, seq: 1001)
        #expect(Self.admit(&driver, data, up: true, id: 2, at: 2000))
        #expect(Self.fates(&driver, upTo: 3000) == [2: 2170])
    }

    @Test func theFirstMatchingRouteWins() throws {
        var driver = try Self.driver(
            """
              - {match: {address: 127.0.0.0/8, port: 80}, link: {latency: 100ms}}
              - {match: {address: 127.0.0.2/32}, link: {latency: 300ms}}
            """)
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed), up: true, id: 1, at: 0))
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed, farPort: 81), up: true, id: 2, at: 0))
        #expect(Self.fates(&driver, upTo: 1000) == [1: 120, 2: 320])
    }

    @Test func aBlackholedRouteDropsOnlyItsPacketsAndADropBeyondTheAccessLinkIsCounted() throws {
        var driver = try Self.driver("  - {match: {address: 127.0.0.2/32}, outage: blackhole}")
        // Up: the access link takes it; the route's path drops it when it gets there.
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed), up: true, id: 1, at: 0))
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_001), up: true, id: 2, at: 0))
        #expect(Self.fates(&driver, upTo: 1000) == [1: -1, 2: 20])
        #expect(driver.summary.up.outageDrops == 1 && driver.summary.lanes[0].up.outageDrops == 1)
        #expect(driver.summary.up.bytes == 40, "the dropped packet's bytes were not delivered")
        // Down: the route's path comes first, and drops it at once.
        #expect(
            !Self.admit(&driver, Self.packet(up: false, far: Self.routed, flags: TCPHeader.ackFlag), up: false, at: 1))
        #expect(
            Self.admit(&driver, Self.packet(up: false, far: Self.other, flags: TCPHeader.ackFlag), up: false, at: 1))
    }

    @Test func aLossyRoutesDropIsReportedWhenItHappensAndCountedByCause() throws {
        var driver = try Self.driver("  - {match: {address: 127.0.0.2/32}, up: {latency: 30ms, loss: 100%}}")
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed), up: true, id: 1, at: 0))
        let early = driver.popEvent(upTo: PacketLinkDriverTests.ms(19))
        #expect(early == nil)
        let event = driver.popEvent(upTo: PacketLinkDriverTests.ms(20))
        guard case .dropped(.up, let packet, .lost)? = event else {
            Issue.record("expected a loss on the route's path, got \(String(describing: event))")
            return
        }
        #expect(packet.id == 1 && packet.route == 0)
        #expect(driver.summary.up.lost == 1 && driver.summary.lanes[0].up.lost == 1 && driver.summary.up.bytes == 0)
    }

    @Test func aRefusingRouteAnswersSynsWithAResetAfterTheWholeRoundTrip() throws {
        var driver = try Self.driver("  - {match: {address: 127.0.0.2/32}, link: {latency: 150ms}, outage: refuse}")
        #expect(!Self.admit(&driver, Self.packet(up: true, far: Self.routed, seq: 7), up: true, at: 10))
        #expect(driver.summary.refusedConnections == 1 && driver.summary.lanes[0].refusedConnections == 1)
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_001), up: true, id: 2, at: 10))
        let early = driver.dueReset(upTo: PacketLinkDriverTests.ms(349))
        #expect(early == nil)
        let due = driver.dueReset(upTo: PacketLinkDriverTests.ms(350))
        let reset = try #require(due)
        #expect(reset.answersSYN && reset.ack == 8 && reset.source == Self.routed)
        let more = driver.dueReset(upTo: PacketLinkDriverTests.ms(10_000))
        #expect(more == nil, "the other connection was not refused")
    }

    /// Opens a connection from the cage's `cagePort` to `far` (SYN up, SYN-ACK down, both delivered).
    static func open(_ driver: inout PacketLinkDriver, far: [UInt8], cagePort: UInt16, at: Int64) {
        _ = Self.admit(&driver, Self.packet(up: true, far: far, cagePort: cagePort), up: true, at: at)
        _ = Self.admit(
            &driver, Self.packet(up: false, far: far, cagePort: cagePort, flags: TCPHeader.syn | TCPHeader.ackFlag),
            up: false, at: at + 1)
        _ = Self.fates(&driver, upTo: at + 400)
    }

    @Test func aResetOutageStartingOnARouteCutsOnlyItsConnections() throws {
        var driver = try Self.driver(
            """
              - match: {address: 127.0.0.2/32}
                link: {latency: 100ms}
                schedule: {repeat: false, phases: [{name: up, for: 1s}, {name: cut, for: 1s, outage: reset}]}
            """)
        Self.open(&driver, far: Self.routed, cagePort: 40_000, at: 0)
        Self.open(&driver, far: Self.other, cagePort: 40_001, at: 0)
        #expect(driver.flows.count == 2)
        _ = Self.fates(&driver, upTo: 1000)
        #expect(driver.summary.connectionsCut == 1 && driver.summary.lanes[0].connectionsCut == 1)
        // Each reset reaches its end after the access link's delay and the route's (120 ms).
        let early = driver.dueReset(upTo: PacketLinkDriverTests.ms(1119))
        #expect(early == nil)
        var resets: [ResetToSend] = []
        while let reset = driver.dueReset(upTo: PacketLinkDriverTests.ms(1120)) { resets.append(reset) }
        #expect(resets.count == 2 && resets.allSatisfy { $0.source == Self.routed || $0.destination == Self.routed })
        // The route refuses new connections while the outage lasts; the other destination does not.
        #expect(!Self.admit(&driver, Self.packet(up: true, far: Self.routed, cagePort: 40_002), up: true, at: 1500))
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_003), up: true, at: 1500))
    }

    @Test func aLiveResetOutageOnARouteCutsItsConnectionsAndLiveChangesApplyToItAlone() throws {
        var driver = try Self.driver("  - {match: {address: 127.0.0.2/32}, link: {latency: 100ms}}")
        Self.open(&driver, far: Self.routed, cagePort: 40_000, at: 0)
        Self.open(&driver, far: Self.other, cagePort: 40_001, at: 0)
        _ = Self.fates(&driver, upTo: 500)
        driver.control(.routeOutage(route: 0, .reset), at: PacketLinkDriverTests.ms(500))
        #expect(driver.summary.connectionsCut == 1 && driver.summary.lanes[0].connectionsCut == 1)
        _ = Self.fates(&driver, upTo: 600)
        driver.control(.routeOutage(route: 0, nil), at: PacketLinkDriverTests.ms(600))
        let slower = try PacketLinkDriverTests.profile("link: {latency: 300ms}")
        driver.control(.switchRoute(route: 0, slower), at: PacketLinkDriverTests.ms(600))
        #expect(
            Self.admit(&driver, Self.packet(up: true, far: Self.routed, cagePort: 40_004), up: true, id: 4, at: 600))
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_005), up: true, id: 5, at: 600))
        #expect(Self.fates(&driver, upTo: 1000) == [4: 920, 5: 620])
        // A stall of the route holds its packets; the access link's other destinations go on.
        driver.control(.routeStall(route: 0, .up), at: PacketLinkDriverTests.ms(1000))
        #expect(
            Self.admit(&driver, Self.packet(up: true, far: Self.routed, cagePort: 40_006), up: true, id: 6, at: 1000))
        #expect(
            Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_007), up: true, id: 7, at: 1000))
        #expect(Self.fates(&driver, upTo: 2000) == [7: 1020])
        driver.control(.routeStall(route: 0, nil), at: PacketLinkDriverTests.ms(2000))
        let after = Self.fates(&driver, upTo: 3000)
        #expect(after.count == 1 && after[6].map { $0 >= 2000 } == true, "\(after)")
        driver.control(.routeOutage(route: 7, .blackhole), at: PacketLinkDriverTests.ms(3000))  // no such route
    }

    @Test func aRoutesSetUpRulesAddToTheAccessLinks() throws {
        var driver = try Self.driver(
            """
              - match: {address: 127.0.0.2/32}
                link: {latency: 50ms}
                connect_delay: 200ms
                firewall: {allow_ports: [443], otherwise: refuse}
                connect_hold: {for: 1s, first: 1}
            """, access: "link: {latency: 20ms}\nconnect_delay: 100ms")
        // Port 80 on the route: its firewall refuses, a round trip of both links later.
        #expect(!Self.admit(&driver, Self.packet(up: true, far: Self.routed, seq: 1), up: true, at: 0))
        #expect(driver.summary.firewallStopped == 1 && driver.summary.lanes[0].firewallStopped == 1)
        let reset = driver.dueReset(upTo: PacketLinkDriverTests.ms(140))
        #expect(reset != nil)
        // 443: the first attempt on the route is held a second; the next meets both connect delays.
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed, farPort: 443), up: true, id: 2, at: 0))
        #expect(
            Self.admit(
                &driver, Self.packet(up: true, far: Self.routed, farPort: 443, cagePort: 40_001), up: true, id: 3,
                at: 0))
        #expect(driver.summary.connectsHeld == 1 && driver.summary.lanes[0].connectsHeld == 1)
        #expect(Self.fates(&driver, upTo: 5000) == [2: 1070, 3: 370])
        // Elsewhere only the access link's delay.
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other), up: true, id: 4, at: 5000))
        #expect(Self.fates(&driver, upTo: 6000) == [4: 5120])
    }

    @Test func aNameLearntFromADNSAnswerRoutesALaterConnection() throws {
        var driver = try Self.driver("  - {match: {host: \"*.cdn.netcond.test\"}, link: {latency: 150ms}}")
        let answer = Self.dnsAnswer("img.cdn.netcond.test", cname: "edge.example", address: [127, 0, 0, 9])
        #expect(Self.admit(&driver, answer, up: false, id: 1, at: 0))
        #expect(driver.names.name(for: [127, 0, 0, 9]) == "img.cdn.netcond.test")
        #expect(Self.admit(&driver, Self.packet(up: true, far: [127, 0, 0, 9]), up: true, id: 2, at: 100))
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_001), up: true, id: 3, at: 100))
        // The session's hosts file: told, not answered.
        driver.learn(name: "api.cdn.netcond.test", addresses: [Self.other])
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.other, cagePort: 40_002), up: true, id: 4, at: 100))
        #expect(Self.fates(&driver, upTo: 1000) == [1: 20, 2: 270, 3: 120, 4: 270])
    }

    @Test func udpTakesARouteBothWays() throws {
        var driver = try Self.driver("  - {match: {address: 127.0.0.2/32, protocol: udp}, link: {latency: 100ms}}")
        let datagram = Self.packet(up: true, far: Self.routed, farPort: 5000, flags: nil, payload: [1, 2, 3])
        #expect(Self.admit(&driver, datagram, up: true, id: 1, at: 0))
        let reply = Self.packet(up: false, far: Self.routed, farPort: 5000, flags: nil, payload: [4])
        #expect(Self.admit(&driver, reply, up: false, id: 2, at: 0))
        // TCP to the same address does not match (protocol: udp).
        #expect(Self.admit(&driver, Self.packet(up: true, far: Self.routed), up: true, id: 3, at: 0))
        #expect(Self.fates(&driver, upTo: 1000) == [1: 120, 2: 120, 3: 20])
        #expect(driver.summary.lanes[0].up.packets == 1 && driver.summary.lanes[0].down.packets == 1)
    }

    /// A DNS response from 127.0.0.53:53 to the cage: `name` is a CNAME of `cname`, which has `address`.
    static func dnsAnswer(_ name: String, cname: String, address: [UInt8]) -> [UInt8] {
        Self.packet(
            up: false, far: [127, 0, 0, 53], farPort: 53, flags: nil,
            payload: Self.dnsMessage(name, cname: cname, address: address))
    }

    /// The DNS message of ``dnsAnswer(_:cname:address:)``.
    static func dnsMessage(_ name: String, cname: String, address: [UInt8]) -> [UInt8] {
        func labels(_ text: String) -> [UInt8] {
            text.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
        }
        var dns: [UInt8] = [0xbe, 0xef, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0] + labels(name) + [0, 1, 0, 1]
        let target = labels(cname)
        let cnameAt = dns.count + 12
        dns += [0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, UInt8(target.count)] + target
        dns += [0xc0, UInt8(cnameAt), 0, 1, 0, 1, 0, 0, 0, 60, 0, 4] + address
        return dns
    }

    @Test func aDNSAnswersAddressesAreReadThroughCompressionAndCutShort() {
        let answer = Self.dnsAnswer("Img.CDN.netcond.test", cname: "edge.example", address: [10, 1, 2, 3])
        let read = answer.withUnsafeBufferPointer { dnsAnswerAddresses($0) }
        // Every name of the chain leads to the address; the one the client asked for comes last.
        #expect(read.map(\.name) == ["edge.example", "img.cdn.netcond.test"])
        #expect(read.allSatisfy { $0.addresses == [[10, 1, 2, 3]] })
        let cut = Array(answer.dropLast(2))
        #expect(cut.withUnsafeBufferPointer { dnsAnswerAddresses($0) }.isEmpty)
        let query = DNSFailureTests.query("img.cdn.netcond.test")
        #expect(query.withUnsafeBufferPointer { dnsAnswerAddresses($0) }.isEmpty, "a query is no answer")
    }
}
