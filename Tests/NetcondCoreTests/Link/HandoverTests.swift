import Testing

@testable import NetcondCore

/// A handover in the stream engine, in virtual time: the connection open at the moment is
/// stranded (nothing of it carried again, either way, no notice to either end), the gap is a
/// blackhole, and after it new connections meet the new profile's link.
@Suite struct HandoverTests {
    static let wifi = Profile(
        name: "wifi", up: LinkDirection(latency: .milliseconds(10)), down: LinkDirection(latency: .milliseconds(10)))
    static let cellular = Profile(
        name: "cellular", up: LinkDirection(latency: .milliseconds(50)), down: LinkDirection(latency: .milliseconds(50))
    )

    @Test func theOpenConnectionIsStrandedAndNewOnesMeetTheNewLinkAfterTheGap() throws {
        var sim = LinkSimulation(Self.wifi)
        let old = sim.model.openFlow(at: .zero)
        guard case .established(let at, _) = sim.connect(old, at: .zero) else {
            Issue.record("not established: \(sim.notices)")
            return
        }
        #expect(at == .ms(20))
        // 100 bytes down before the handover arrive; the handover at 1 s with a 2 s gap.
        sim.model.send(old, .down, bytes: 100, at: .ms(500))
        sim.run(until: .ms(1000))
        #expect(sim.delivered(old, .down) == 100)
        #expect(sim.model.handover(to: Self.cellular, gap: .seconds(2), at: .ms(1000)) == 1)
        // Bytes written on the stranded connection, either way, never arrive, however long.
        sim.model.send(old, .down, bytes: 500, at: .ms(1100))
        sim.model.send(old, .up, bytes: 50, at: .ms(1100))
        // A connection tried during the gap: its SYNs at 1.5 s and 2.5 s vanish, the one at 4.5 s
        // goes through on the new link (a round trip of 100 ms).
        let early = sim.model.openFlow(at: .ms(1500))
        guard case .established(let earlyAt, _) = sim.connect(early, at: .ms(1500)) else {
            Issue.record("the connection tried in the gap was not established: \(sim.notices)")
            return
        }
        #expect(earlyAt == .ms(4600))
        let late = sim.model.openFlow(at: .ms(5000))
        guard case .established(let lateAt, _) = sim.connect(late, at: .ms(5000)) else {
            Issue.record("not established after the gap")
            return
        }
        #expect(lateAt == .ms(5100))
        sim.run(until: .s(200))
        #expect(sim.delivered(old, .down) == 100 && sim.delivered(old, .up) == 0)
        // Nothing told either end of the stranded connection.
        for case .cut(let flow, _, _) in sim.notices { #expect(flow != old) }
        #expect(sim.model.strandedConnections == 1)
        #expect(sim.model.profile.name == "cellular" && sim.model.state.outage == nil)
    }

    /// A handover with no gap switches at once; one during another's gap restarts it.
    @Test func aHandoverWithoutAGapSwitchesAtOnceAndAnotherRestartsTheGap() {
        let model = LinkModel(profile: Self.wifi, seed: 1)
        model.handover(to: Self.cellular, gap: .zero, at: .ms(10))
        #expect(model.profile.name == "cellular" && model.state.outage == nil)
        model.handover(to: Self.wifi, gap: .seconds(1), at: .ms(20))
        model.handover(to: Self.cellular, gap: .seconds(1), at: .ms(520))
        _ = model.advance(to: .ms(1100))
        #expect(model.state.outage == .blackhole, "the first gap's end is no more")
        _ = model.advance(to: .ms(1520))
        #expect(model.profile.name == "cellular" && model.state.outage == nil)
    }
}
