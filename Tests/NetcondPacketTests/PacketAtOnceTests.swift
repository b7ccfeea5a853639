import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// The engine lets a packet go before the link's bookkeeping when ``PacketLinkDriver/passesAtOnce(_:)``
/// says the link is certain to deliver it at once, unchanged. These check that certainty against
/// what ``PacketLinkDriver/admit`` and the network then decide, for every kind of packet and
/// through profile switches, outages, stalls and cuts; and that anything that can hold, drop,
/// change or answer a packet makes it false.
@Suite struct PacketAtOnceTests {
    typealias T = PacketLinkDriverTests

    static func driver(_ yaml: String) throws -> PacketLinkDriver {
        PacketLinkDriver(profile: try T.profile(yaml), seed: 7)
    }

    @Test func aLinkThatHoldsNothingBackPassesAtOnceUntilSomethingIsOnIt() throws {
        var driver = try Self.driver("link: {latency: 0ms}")
        #expect(driver.passesAtOnce(.up) && driver.passesAtOnce(.down))
        #expect(T.admit(&driver, T.tcp(up: true, flags: TCPHeader.syn), up: true, at: 5))
        // Taken, not yet given back: a packet behind it waits for it.
        #expect(!driver.passesAtOnce(.up) && !driver.passesAtOnce(.down))
        let taken = driver.popDelivery(upTo: T.ms(5))
        let (direction, delivery) = try #require(taken)
        #expect(direction == .up && delivery.at == T.ms(5) && delivery.corruptByte == nil && !delivery.isCopy)
        #expect(driver.passesAtOnce(.up) && driver.passesAtOnce(.down))
    }

    @Test func oneDirectionWithLatencyHoldsOnlyThatDirectionAndAnythingOnTheLinkHoldsBoth() throws {
        var driver = try Self.driver("up: {latency: 0ms}\ndown: {latency: 20ms}")
        #expect(driver.passesAtOnce(.up) && !driver.passesAtOnce(.down))
        #expect(T.admit(&driver, T.tcp(up: false, flags: TCPHeader.ackFlag), up: false, at: 0))
        #expect(!driver.passesAtOnce(.up), "a packet is on the link")
        _ = driver.popDelivery(upTo: T.ms(20))
        #expect(driver.passesAtOnce(.up))
    }

    @Test(arguments: [
        "link: {latency: 1ms}",
        "link: {latency: 0ms, jitter: 1ms}",
        "link: {latency: 0ms, bandwidth: 100gbit}",
        "link: {latency: 0ms, loss: 1%}",
        "link: {latency: 0ms, duplicate: 1%}",
        "link: {latency: 0ms, corrupt: 1%}",
        "link: {latency: 0ms, reorder: 1%}",
        "link: {latency: 0ms, connection_bandwidth: 1mbit}",
        "link: {latency: 0ms}\ndns_delay: 1ms",
        "link: {latency: 0ms}\nconnect_delay: 1ms",
        "link: {latency: 0ms}\nfirewall: {allow_ports: [443], otherwise: refuse}",
        "link: {latency: 0ms}\nconnect_hold: {for: 2s, first: 1}",
        "link: {latency: 0ms}\ndns_fail: ['*.invalid']",
        "link: {latency: 0ms}\nroutes: [{match: {address: 127.0.0.2/32}, link: {latency: 0ms}}]",
        "link: {latency: 0ms}\nschedule: {repeat: false, phases: [{name: dark, for: 1s, outage: blackhole}]}",
        "link: {latency: 0ms}\nschedule: {repeat: false, phases: [{name: no, for: 1s, outage: refuse}]}",
        "link: {latency: 0ms}\nschedule: {repeat: false, phases: [{name: cut, for: 1s, outage: reset}]}",
        "link: {latency: 0ms}\nschedule: {repeat: false, phases: [{name: stuck, for: 1s, stall: both}]}",
    ])
    func anythingThatCanHoldDropChangeOrAnswerAPacketIsNotAtOnce(_ yaml: String) throws {
        var driver = try Self.driver(yaml)
        driver.follow(to: T.ms(1)) { _ in }
        #expect(!driver.passesAtOnce(.up) && !driver.passesAtOnce(.down), "\(yaml)")
    }

    @Test func aRadioOnlyWatchesAndAnIdleLinkAfterLiveChangesPassesAgain() throws {
        var driver = try Self.driver("link: {latency: 0ms}\nradio: lte")
        #expect(driver.passesAtOnce(.up) && driver.passesAtOnce(.down))
        driver.control(.outage(.blackhole), at: T.ms(10))
        #expect(!driver.passesAtOnce(.up) && !driver.passesAtOnce(.down))
        driver.control(.outage(nil), at: T.ms(20))
        driver.control(.stall(.down), at: T.ms(20))
        #expect(driver.passesAtOnce(.up) && !driver.passesAtOnce(.down))
        driver.control(.stall(nil), at: T.ms(30))
        #expect(driver.passesAtOnce(.up) && driver.passesAtOnce(.down))
    }

    /// A UDP DNS query for `name` from the cage (up), or a UDP datagram to port 9 (`name` nil).
    static func udp(_ name: String?) -> [UInt8] {
        if let name { return DNSFailureTests.query(name) }
        return PacketRouteTests.packet(up: true, far: [127, 0, 0, 2], farPort: 9, flags: nil, payload: [1, 2, 3])
    }

    /// Seeded random runs of packets of every kind, profile switches and live changes: whenever the
    /// driver said a packet was certain to pass at once, the link took it and gave it back next,
    /// whole and unchanged, at the moment it was offered. Both answers come up many times.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func whatIsCertainToPassAtOnceDoesForEveryKindOfPacket(_ seed: UInt64) throws {
        let profiles = try [
            "link: {latency: 0ms}", "up: {latency: 0ms}\ndown: {latency: 3ms}", "link: {latency: 2ms}",
            "link: {latency: 0ms, loss: 20%}", "link: {latency: 0ms, duplicate: 30%, corrupt: 30%}",
            "link: {latency: 0ms, bandwidth: 10mbit}", "link: {latency: 0ms}\nconnect_delay: 4ms",
            "link: {latency: 0ms}\nfirewall: {allow_ports: [443], otherwise: refuse}",
            "link: {latency: 0ms}\nconnect_hold: {for: 5ms, first: 2}", "link: {latency: 0ms}\ndns_fail: ['*.invalid']",
            "link: {latency: 0ms}\nradio: lte",
        ].map { try T.profile($0) }
        var random = SeededRandom(seed: seed)
        var driver = PacketLinkDriver(profile: profiles[0], seed: seed)
        var certain = 0
        var uncertain = 0
        var now = Instant.zero
        for id in UInt32(1)...3000 {
            now = now + Span(nanoseconds: Int64(random.next() % 2_000_000))
            driver.follow(to: now) { _ in }
            switch random.next() % 40 {
            case 0:
                // Half the switches to a link that passes everything (plain, or with a radio).
                let index =
                    random.next() % 2 == 0
                    ? [0, 10][Int(random.next() % 2)] : Int(random.next() % UInt64(profiles.count))
                driver.control(.switchProfile(profiles[index]), at: now)
            case 1:
                driver.control(.outage([nil, nil, nil, .blackhole, .refuse, .reset][Int(random.next() % 6)]), at: now)
            case 2: driver.control(.stall([nil, nil, nil, .up, .down, .both][Int(random.next() % 6)]), at: now)
            case 3: driver.control(.cut, at: now)
            default: break
            }
            let up = random.next() % 2 == 0
            let flags = [TCPHeader.syn, TCPHeader.ackFlag, TCPHeader.rst, TCPHeader.fin | TCPHeader.ackFlag]
            let bytes: [UInt8]
            switch random.next() % 5 {
            case 0 where up: bytes = Self.udp(random.next() % 2 == 0 ? "api.example.invalid" : "origin.netcond.test")
            case 1 where up: bytes = Self.udp(nil)
            default:
                bytes = T.tcp(
                    up: up, farPort: random.next() % 2 == 0 ? 80 : 443, flags: flags[Int(random.next() % 4)],
                    seq: UInt32(truncatingIfNeeded: random.next()))
            }
            let atOnce = driver.passesAtOnce(up ? .up : .down)
            let taken = T.admit(&driver, bytes, up: up, id: id, at: now)
            if atOnce {
                certain += 1
                #expect(taken, "packet \(id) was certain to pass")
                let first = driver.popEvent(upTo: now)
                guard case .delivered(let direction, let delivery)? = first else {
                    Issue.record(
                        "packet \(id) was certain to pass at once, and the link gave back \(String(describing: first))")
                    continue
                }
                #expect(direction == (up ? .up : .down) && delivery.unit.id == id && delivery.at == now)
                #expect(delivery.corruptByte == nil && !delivery.isCopy)
            } else {
                uncertain += 1
            }
            // The engine takes back what is due before the next packet.
            while let event = driver.popEvent(upTo: now) {
                if case .delivered(let direction, let delivery) = event {
                    driver.delivered(delivery, direction, corrupted: delivery.corruptByte != nil)
                }
            }
            while driver.dueReset(upTo: now) != nil {}
            while driver.dueInjected(upTo: now) != nil {}
        }
        #expect(certain > 300 && uncertain > 300, "certain \(certain), uncertain \(uncertain)")
    }
}
