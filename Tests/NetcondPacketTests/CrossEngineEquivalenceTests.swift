import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// The same profile is the same link in both engines: one sequence of packets (sizes, directions,
/// connections, times), offered in virtual time to the link paths as the stream engine drives them
/// (inside ``LinkModel``, following its timeline by its own events) and as the packet engine does
/// (``PacketLinkDriver``, following the timeline as packets come), meets the same fates — the
/// same drops for the same reasons, the same moments of delivery — through schedule phases that
/// change the rate, the loss, the queue and its discipline, a blackhole and a stall.
@Suite struct CrossEngineEquivalenceTests {
    static let profile = """
        name: equivalence
        tcp: cubic
        link:
          latency: 30ms
          jitter: 5ms
          bandwidth: 2Mbit
          queue: 40 packets
          loss: 2%
        down:
          connection_bandwidth: 1Mbit
        schedule:
          repeat: false
          phases:
            - {name: steady, for: 1500ms}
            - {name: dark, for: 300ms, outage: blackhole}
            - {name: bursty, for: 1s, link: {loss: {model: gilbert-elliott, p: 5%, r: 30%, loss_in_bad: 60%}, queue: 24KB}}
            - {name: stuck, for: 400ms, stall: down}
            - {name: managed, for: 2s, link: {bandwidth: 1Mbit, aqm: codel, queue: 200 packets}}
        """

    static let end = Instant(nanoseconds: 60_000_000_000)

    /// One made-up packet: when, which way, which connection, how big.
    struct Offer {
        var index: Int
        var at: Instant
        var direction: Direction
        var connection: Int
        var bytes: Int
    }

    /// 4,000 packets over 6 s on four connections, 40–1,500 bytes, from a seeded stream.
    static func offers(seed: UInt64) -> [Offer] {
        var random = SeededRandom(seed: seed)
        var at = Instant.zero
        return (0..<4000).map { index in
            at = at + .microseconds(Int64(random.next() % 3000))
            let direction: Direction = random.next() % 4 == 0 ? .up : .down
            return Offer(
                index: index, at: at, direction: direction, connection: Int(random.next() % 4),
                bytes: 40 + Int(random.next() % 1461))
        }
    }

    /// An IPv4 TCP packet of connection `connection` (its port), `bytes` long on the wire.
    static func tcpPacket(_ offer: Offer) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 40)
        bytes[0] = 0x45
        bytes[9] = 6
        let cage: [UInt8] = [127, 0, 0, 1], far: [UInt8] = [127, 0, 0, 2]
        let (source, destination) = offer.direction == .up ? (cage, far) : (far, cage)
        bytes.replaceSubrange(12..<16, with: source)
        bytes.replaceSubrange(16..<20, with: destination)
        let cagePort = UInt16(40_000 + offer.connection), farPort: UInt16 = 80
        let (sourcePort, destinationPort) = offer.direction == .up ? (cagePort, farPort) : (farPort, cagePort)
        bytes[20] = UInt8(sourcePort >> 8)
        bytes[21] = UInt8(sourcePort & 0xff)
        bytes[22] = UInt8(destinationPort >> 8)
        bytes[23] = UInt8(destinationPort & 0xff)
        bytes[32] = 0x50
        bytes[33] = 0x10  // ACK
        return bytes
    }

    /// What became of each packet: nil while undecided, then dropped, or delivered at a moment.
    enum Fate: Equatable {
        case dropped
        case delivered(Instant)
    }

    /// The packets through the stream engine's paths.
    static func throughStreamEngine(_ profile: Profile, seed: UInt64, _ offers: [Offer]) -> (
        fates: [Fate?], counters: [PathCounters]
    ) {
        var fates = [Fate?](repeating: nil, count: offers.count)
        let model = LinkModel(profile: profile, seed: seed)
        model.onPathDelivery = { _, delivery in
            if !delivery.isCopy { fates[Int(delivery.unit.seq)] = .delivered(delivery.at) }
        }
        for offer in offers {
            _ = model.advance(to: offer.at)
            let unit = SegmentRef(
                flow: FlowID(rawValue: UInt64(offer.connection)), seq: UInt64(offer.index), generation: 0)
            if case .dropped = model.links.offer(
                unit, offer.direction, route: nil, bytes: offer.bytes, connection: unit.flow, at: offer.at)
            {
                fates[offer.index] = .dropped
            }
        }
        _ = model.advance(to: Self.end)
        return (fates, [model.links.access[.up].counters, model.links.access[.down].counters])
    }

    /// The same packets through the packet engine's driver.
    static func throughPacketEngine(_ profile: Profile, seed: UInt64, _ offers: [Offer]) -> (
        fates: [Fate?], counters: [PathCounters]
    ) {
        var fates = [Fate?](repeating: nil, count: offers.count)
        var driver = PacketLinkDriver(profile: profile, seed: seed)
        func take(_ delivery: PathDelivery<HeldPacket>) {
            if !delivery.isCopy { fates[Int(delivery.unit.id)] = .delivered(delivery.at) }
        }
        for offer in offers {
            driver.follow(to: offer.at) { if case .delivered(_, let delivery) = $0 { take(delivery) } }
            while let (_, delivery) = driver.popDelivery(upTo: offer.at) { take(delivery) }
            let bytes = Self.tcpPacket(offer)
            let taken = bytes.withUnsafeBufferPointer { buffer -> Bool in
                let tcp = TCPHeader(buffer.baseAddress!, copied: buffer.count, length: offer.bytes)
                let packet = HeldPacket(
                    queue: offer.direction == .up ? 0 : 1, id: UInt32(offer.index), mark: 0, tcp: tcp,
                    length: UInt32(offer.bytes))
                return driver.admit(
                    packet, up: offer.direction == .up, wireLength: offer.bytes, segments: 1,
                    payload: buffer.baseAddress!,
                    copied: buffer.count, bytes: nil, at: offer.at)
            }
            if !taken { fates[offer.index] = .dropped }
        }
        driver.follow(to: Self.end) { if case .delivered(_, let delivery) = $0 { take(delivery) } }
        while let (_, delivery) = driver.popDelivery(upTo: Self.end) { take(delivery) }
        return (fates, [driver.network.access[.up].counters, driver.network.access[.down].counters])
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func theSamePacketsMeetTheSameFatesInBothEngines(seed: UInt64) throws {
        let profile = try ProfileDecoder().decode(yaml: Self.profile, file: "Profiles/equivalence.yaml")
        let offers = Self.offers(seed: seed &* 7919)
        let stream = Self.throughStreamEngine(profile, seed: seed, offers)
        let packet = Self.throughPacketEngine(profile, seed: seed, offers)
        #expect(
            stream.fates.allSatisfy { $0 != nil } && packet.fates.allSatisfy { $0 != nil }, "every packet has a fate")
        let differing = offers.indices.filter { stream.fates[$0] != packet.fates[$0] }
        #expect(
            differing.isEmpty,
            "\(differing.count) differ, first: \(differing.prefix(3).map { (offers[$0], stream.fates[$0], packet.fates[$0]) })"
        )
        #expect(stream.counters == packet.counters)
        // The profile did something in each of its phases.
        let counters = stream.counters[1]
        #expect(
            counters.lost > 0 && counters.outageDrops > 0 && counters.queueDrops > 0 && counters.aqmDrops > 0,
            "\(counters)")
    }
}
