import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// Routes are the same network in both engines: the packets of ``CrossEngineEquivalenceTests``,
/// half of the connections to a destination a route takes (its own rate, loss, queue, delay and a
/// blackhole of its own), meet the same fates in the stream engine (its flows on the route) and in
/// the packet engine (which finds the route from each packet's far port) — the drops on either
/// path, each for the same reason, and the moments of delivery after both paths.
@Suite struct CrossEngineRoutesTests {
    static let profile = """
        name: routed-equivalence
        link:
          latency: 30ms
          jitter: 5ms
          bandwidth: 4Mbit
          queue: 60 packets
          loss: 1%
        routes:
          - name: far
            match: {port: 80}
            link: {latency: 40ms, bandwidth: 1Mbit, queue: 20 packets, loss: 2%}
            schedule:
              repeat: false
              phases:
                - {for: 2s}
                - {for: 300ms, outage: blackhole}
                - {for: 5s, link: {aqm: codel, queue: 100 packets}}
        """

    typealias Offer = CrossEngineEquivalenceTests.Offer
    typealias Fate = CrossEngineEquivalenceTests.Fate

    /// Even connections go to port 80 (the route's), odd ones to port 81 (the access link alone).
    static func farPort(_ offer: Offer) -> UInt16 { offer.connection % 2 == 0 ? 80 : 81 }

    static func throughStreamEngine(_ profile: Profile, seed: UInt64, _ offers: [Offer]) -> [Fate?] {
        var fates = [Fate?](repeating: nil, count: offers.count)
        let model = LinkModel(profile: profile, seed: seed)
        model.onPathDelivery = { _, delivery in
            if !delivery.isCopy { fates[Int(delivery.unit.seq)] = .delivered(delivery.at) }
        }
        model.onDropBeyond = { _, segment in fates[Int(segment.seq)] = .dropped }
        for offer in offers {
            _ = model.advance(to: offer.at)
            let unit = SegmentRef(
                flow: FlowID(rawValue: UInt64(offer.connection)), seq: UInt64(offer.index), generation: 0)
            let route = Self.farPort(offer) == 80 ? 0 : nil
            if case .dropped = model.links.offer(
                unit, offer.direction, route: route, bytes: offer.bytes, connection: unit.flow, at: offer.at)
            {
                fates[offer.index] = .dropped
            }
        }
        _ = model.advance(to: CrossEngineEquivalenceTests.end)
        return fates
    }

    static func throughPacketEngine(_ profile: Profile, seed: UInt64, _ offers: [Offer]) -> [Fate?] {
        var fates = [Fate?](repeating: nil, count: offers.count)
        var driver = PacketLinkDriver(profile: profile, seed: seed)
        func take(_ event: NetworkEvent<HeldPacket>) {
            switch event {
            case .delivered(_, let delivery):
                if !delivery.isCopy { fates[Int(delivery.unit.id)] = .delivered(delivery.at) }
            case .dropped(_, let packet, _): fates[Int(packet.id)] = .dropped
            }
        }
        for offer in offers {
            driver.follow(to: offer.at, deliver: take)
            while let event = driver.popEvent(upTo: offer.at) { take(event) }
            var bytes = CrossEngineEquivalenceTests.tcpPacket(offer)
            let port = Self.farPort(offer)
            bytes[offer.direction == .up ? 23 : 21] = UInt8(port & 0xff)
            let taken = bytes.withUnsafeBufferPointer { buffer -> Bool in
                let tcp = TCPHeader(buffer.baseAddress!, copied: buffer.count, length: offer.bytes)
                let packet = HeldPacket(
                    queue: offer.direction == .up ? 0 : 1, id: UInt32(offer.index), mark: 0, tcp: tcp,
                    length: UInt32(offer.bytes))
                return driver.admit(
                    packet, up: offer.direction == .up, wireLength: offer.bytes, segments: 1,
                    payload: buffer.baseAddress!, copied: buffer.count, bytes: nil, at: offer.at)
            }
            if !taken { fates[offer.index] = .dropped }
        }
        let end = CrossEngineEquivalenceTests.end
        driver.follow(to: end, deliver: take)
        while let event = driver.popEvent(upTo: end) { take(event) }
        return fates
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func theSamePacketsMeetTheSameFatesOnTheirRoutesInBothEngines(seed: UInt64) throws {
        let profile = try ProfileDecoder().decode(yaml: Self.profile, file: "Profiles/routed-equivalence.yaml")
        let offers = CrossEngineEquivalenceTests.offers(seed: seed &* 7919)
        let stream = Self.throughStreamEngine(profile, seed: seed, offers)
        let packet = Self.throughPacketEngine(profile, seed: seed, offers)
        #expect(stream.allSatisfy { $0 != nil } && packet.allSatisfy { $0 != nil }, "every packet has a fate")
        let differing = offers.indices.filter { stream[$0] != packet[$0] }
        #expect(
            differing.isEmpty,
            "\(differing.count) differ, first: \(differing.prefix(3).map { (offers[$0], stream[$0], packet[$0]) })")
        // The route did something: its packets arrive later than the access link's alone, and some
        // were dropped beyond the access link.
        let routed = offers.indices.filter { Self.farPort(offers[$0]) == 80 }
        #expect(routed.contains { stream[$0] == .dropped })
    }
}
