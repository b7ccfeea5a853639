import Testing

@testable import NetcondCore

/// The stream engine's acknowledgements come back the way a packet would: over the connection's
/// whole reverse path (the access link and its route), with that path's jitter, in order. The
/// modelled sender's round trips, and so its slow start and its retransmission timer, are the ones
/// the kernel's sender meets under the packet engine.
@Suite struct AcknowledgementPathTests {
    /// Seconds a 500 KB download takes once established.
    static func download(_ profile: Profile, host: String = "", seed: UInt64 = 1) -> (Span, LinkModel, FlowID)? {
        var sim = LinkSimulation(profile, seed: seed)
        let flow = sim.model.openFlow(at: .zero)
        guard case .established(let at, _) = sim.connect(flow, at: .zero, host: host) else { return nil }
        guard let done = sim.bulk(flow, .down, total: 500_000, from: at, deadline: at + .seconds(120)) else {
            return nil
        }
        return (done - at, sim.model, flow)
    }

    /// Before, a route's latency delayed the data but not its acknowledgements: the sender saw a
    /// round trip without the route's way back, and a download to a far route ran 1.6 times as fast
    /// as the packet engine's (0.50 against 0.81 s through a 50 ms route).
    @Test func aRoutedDownloadTakesAsLongAsOneOverAnAccessLinkOfTheSameDelays() throws {
        let routed = try ProfileDecoder().decode(
            yaml: "link: {latency: 20ms, bandwidth: 20Mbit}\nroutes:\n  - match: {host: cdn.example.test}\n"
                + "    link: {latency: 300ms}\n",
            file: "routed.yaml")
        let direct = try ProfileDecoder().decode(
            yaml: "link: {latency: 320ms, bandwidth: 20Mbit}\n", file: "direct.yaml")
        let viaRoute = try #require(Self.download(routed, host: "cdn.example.test"))
        let viaAccess = try #require(Self.download(direct))
        #expect(viaRoute.1.route(of: viaRoute.2) == 0)
        #expect(abs((viaRoute.0 - viaAccess.0).nanoseconds) <= Span.milliseconds(1).nanoseconds)
        #expect(viaRoute.1.flows[viaRoute.2]?.down.smoothedRTT.map { $0 >= .milliseconds(640) } == true)
    }

    /// Jitter on the way back alone (none on the data's way) still makes the sender's round trips
    /// vary: its smoothed round trip is past the path's least, and the download is slower (CUBIC's
    /// HyStart leaves slow start on a round whose least round trip grew past the least seen).
    @Test func jitterOnTheWayBackReachesTheSender() throws {
        var jittery = Profile.test(latency: .milliseconds(3), bandwidth: .mbit(40))
        jittery.up.jitter = .milliseconds(10)
        let still = Profile.test(latency: .milliseconds(3), bandwidth: .mbit(40))
        let withJitter = try #require(Self.download(jittery))
        let without = try #require(Self.download(still))
        #expect(withJitter.0 > without.0)
        let rtt = try #require(withJitter.1.flows[withJitter.2]?.down.smoothedRTT)
        #expect(rtt > .milliseconds(8) && rtt < .milliseconds(6 + 10 + 20))
        // The same seed draws the same jitter; the way back keeps its order.
        #expect(try #require(Self.download(jittery)).0 == withJitter.0)
    }

    /// Acknowledgements never overtake one another, whatever each one's draw: the reverse path is a
    /// delay line, as the packet engine's.
    @Test func acknowledgementsArriveInTheOrderTheyWereSent() {
        var profile = Profile.test(latency: .milliseconds(5), bandwidth: .mbit(10))
        profile.up.jitter = .milliseconds(50)
        var sim = LinkSimulation(profile, seed: 7)
        let flow = sim.model.openFlow(at: .zero)
        _ = sim.bulk(flow, .down, total: 100_000, from: .zero, deadline: .s(60))
        let side = sim.model.flows[flow]!.down
        let now = sim.model.now
        // At one moment, two hundred acknowledgements each draw up to 50 ms: unordered draws, in order.
        let arrivals = (0..<200).map { _ in sim.model.ackArrival(sim.model.flows[flow]!, side) }
        #expect(arrivals == arrivals.sorted())
        #expect(arrivals.first! < arrivals.last!, "the draws vary")
        #expect(arrivals.allSatisfy { $0 >= now + .milliseconds(5) && $0 <= now + .milliseconds(55) })
    }
}
