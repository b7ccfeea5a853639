import Testing

@testable import NetcondCore
@testable import NetcondPacket

/// Both engines drive the radio from the same place (``LinkNetwork``): the same packets offered
/// as the stream engine offers its segments and as the packet engine admits packets give the same
/// radio, interval for interval (the same promotions, the same tails), through loss and a blackhole.
@Suite struct CrossEngineRadioTests {
    static let profile = """
        name: radio-equivalence
        link: {latency: 30ms, bandwidth: 2Mbit, loss: 5%}
        schedule:
          phases:
            - {name: steady, for: 20s}
            - {name: dark, for: 2s, outage: blackhole}
        radio: lte
        """

    typealias Offer = CrossEngineEquivalenceTests.Offer

    /// Bursts of 30 packets (10 ms apart, a quarter up) at 0 and 4 s (on until ~14.4 s), 20 s (into
    /// the blackhole: only the device's own up packets wake it, on until ~30.4 s), 40 and 41 s.
    static let offers: [Offer] = {
        var offers: [Offer] = []
        for start: Int64 in [0, 4000, 20_000, 40_000, 41_000] {
            for step in 0..<30 {
                offers.append(
                    Offer(
                        index: offers.count, at: Instant(nanoseconds: (start + 10 * Int64(step)) * 1_000_000),
                        direction: step % 4 == 0 ? .up : .down, connection: step % 3, bytes: 100 + 40 * step))
            }
        }
        return offers
    }()

    static let end = Instant(nanoseconds: 60_000_000_000)

    @Test(arguments: [UInt64(1), 2])
    func theSamePacketsGiveTheSameRadioInBothEngines(seed: UInt64) throws {
        let profile = try ProfileDecoder().decode(yaml: Self.profile, file: "Profiles/radio-equivalence.yaml")
        let model = LinkModel(profile: profile, seed: seed)
        for offer in Self.offers {
            _ = model.advance(to: offer.at)
            let unit = SegmentRef(
                flow: FlowID(rawValue: UInt64(offer.connection)), seq: UInt64(offer.index), generation: 0)
            _ = model.links.offer(
                unit, offer.direction, route: nil, bytes: offer.bytes, connection: unit.flow, at: offer.at)
        }
        _ = model.advance(to: Self.end)

        var driver = PacketLinkDriver(profile: profile, seed: seed)
        for offer in Self.offers {
            driver.follow(to: offer.at) { _ in }
            while driver.popDelivery(upTo: offer.at) != nil {}
            let bytes = CrossEngineEquivalenceTests.tcpPacket(offer)
            _ = bytes.withUnsafeBufferPointer { buffer -> Bool in
                let tcp = TCPHeader(buffer.baseAddress!, copied: buffer.count, length: offer.bytes)
                let packet = HeldPacket(
                    queue: offer.direction == .up ? 0 : 1, id: UInt32(offer.index), mark: 0, tcp: tcp,
                    length: UInt32(offer.bytes))
                return driver.admit(
                    packet, up: offer.direction == .up, wireLength: offer.bytes, segments: 1,
                    payload: buffer.baseAddress!, copied: buffer.count, bytes: nil, at: offer.at)
            }
        }
        driver.follow(to: Self.end) { _ in }
        while driver.popDelivery(upTo: Self.end) != nil {}

        let stream = try #require(model.radio).intervals(upTo: Self.end)
        let packet = try #require(driver.network.radio).intervals(upTo: Self.end)
        #expect(stream == packet)
        #expect(
            stream.filter { $0.state == .promotion }.map(\.start)
                == [.zero, Instant(nanoseconds: 20_000_000_000), Instant(nanoseconds: 40_000_000_000)], "\(stream)")
        // The burst sent into the blackhole woke the radio (the device sent it) though none arrived.
        let report = RadioReport(spec: profile.radio!, intervals: stream, from: .zero, to: Self.end)
        #expect(report.intervals.first { $0.state == .idle && $0.start > 25 }.map { $0.start > 30 } == true)
    }
}
