import Testing

@testable import NetcondCore

/// The stream engine's SYN and SYN-ACK cross the link's paths as 60-byte packets: a loss burst, a
/// step series' loss, the queue and the delay in force reach a handshake as they reach data.
@Suite struct HandshakePathTests {
    /// Keeps `flow` uploading (its sender's buffer topped up) and runs the link event by event
    /// until `done` says so or `deadline` passes; returns the moment it stopped.
    static func upload(
        _ sim: inout LinkSimulation, _ flow: FlowID, until deadline: Instant, done: (LinkSimulation) -> Bool
    ) -> Instant {
        var now = sim.model.now
        while now < deadline && !done(sim) {
            if sim.model.unsent(flow, .up) < 64 * 1024 { sim.model.send(flow, .up, bytes: 64 * 1024, at: now) }
            guard let next = sim.model.nextEventTime else { break }
            now = min(next, deadline)
            sim.deliveries += sim.model.advance(to: now)
            sim.notices += sim.model.takeNotices()
        }
        return now
    }

    static func outcome(_ sim: LinkSimulation, _ flow: FlowID) -> ConnectOutcome? {
        for case .connected(flow, let outcome) in sim.notices { return outcome }
        return nil
    }

    @Test func aSynSentDuringALossBurstIsRetried() throws {
        // Rare bursts (a good packet turns bad with 0.05 %: a long-run loss of 4.8 %) of ~100
        // packets, every one of them lost. An upload drives the up direction into a burst; a
        // connection attempted then loses its SYN and retries it a second later, as Linux does.
        var profile = Profile.test(latency: .milliseconds(20), bandwidth: .mbit(10))
        profile.up.loss = .gilbertElliott(
            p: Probability(0.0005), r: Probability(0.01), lossInGood: .zero, lossInBad: Probability(1))
        var sim = LinkSimulation(profile, seed: 3)
        let upload = sim.model.openFlow(at: .zero)
        let burst = Self.upload(&sim, upload, until: .s(120)) { $0.model.links.access[.up].counters.lost > 0 }
        #expect(sim.model.links.access[.up].counters.lost == 1 && burst < .s(120))
        let flow = sim.model.openFlow(at: burst)
        sim.model.connect(flow, at: burst, resolvesName: false)
        _ = Self.upload(&sim, upload, until: burst + .seconds(130)) { Self.outcome($0, flow) != nil }
        guard case .established(let at, let retransmits) = Self.outcome(sim, flow) else {
            Issue.record("not established: \(String(describing: Self.outcome(sim, flow)))")
            return
        }
        #expect(retransmits >= 1)
        // The SYN that got through left 1, 3, 7 … s after the first.
        let left = burst + .seconds(Int64((1 << retransmits) - 1))
        #expect(at > left && at < left + .seconds(1), "established at \(at), burst at \(burst)")
    }

    @Test func aSeriesLossOfAllFailsConnectsOnlyWhileItLasts() throws {
        // No loss until 10 s, all lost from 10 to 20 s, none after; 20 ms each way, and 60 bytes
        // at 480 kbit/s take 1 ms each way.
        let series = try LinkSeries.parse(
            "0, 480kbit, 20ms, 0%; 10, 480kbit, 20ms, 100%; 20, 480kbit, 20ms, 0%", source: "gap")
        let direction = LinkDirection(series: series)
        var sim = LinkSimulation(Profile(name: "gap", up: direction, down: direction))
        let early = sim.model.openFlow(at: .s(5))
        #expect(sim.connect(early, at: .s(5)) == .established(at: .ms(5_042), synRetransmits: 0))
        // SYNs at 12, 13, 15 and 19 s are lost; the one at 27 s gets through.
        let during = sim.model.openFlow(at: .s(12))
        #expect(sim.connect(during, at: .s(12)) == .established(at: .ms(27_042), synRetransmits: 4))
    }

    @Test func aSynWaitsItsTurnInTheQueue() throws {
        // 120 kbit/s: a 1,500-byte segment takes 100 ms, a 60-byte SYN 4 ms. Five segments queued
        // before it hold the SYN back half a second; its SYN-ACK then takes 4 + 50 ms.
        var sim = LinkSimulation(.test(latency: .milliseconds(50), bandwidth: .kbit(120)))
        let busy = sim.model.openFlow(at: .zero)
        sim.model.send(busy, .up, bytes: 1460 * 5, at: .zero)
        let flow = sim.model.openFlow(at: .zero)
        #expect(sim.connect(flow, at: .zero) == .established(at: .ms(608), synRetransmits: 0))
    }

    @Test func theServerLearnsOfTheConnectionWhenItsSynLeaves() throws {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        sim.model.setOutage(.blackhole, at: .zero)
        let flow = sim.model.openFlow(at: .zero)
        sim.model.connect(flow, at: .zero, resolvesName: false)
        sim.run(until: .s(2))
        sim.model.setOutage(nil, at: .s(2))
        sim.run(until: .s(4))
        // The SYNs at 0 and 1 s were lost in the blackhole: no word before the one at 3 s.
        #expect(
            sim.notices.filter { if case .handshakeUnderWay = $0 { return true } else { return false } }
                == [.handshakeUnderWay(flow, at: .s(3))])
        #expect(sim.notices.contains(.connected(flow, .established(at: .ms(3_100), synRetransmits: 2))))
    }
}
