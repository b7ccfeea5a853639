import Testing

@testable import NetcondCore

/// Outages: blackhole, refuse and reset, on open connections and on new ones.
@Suite struct OutageTests {
    @Test func aBlackholeHoldsNewConnectionsInSetUpUntilAfterItEnds() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        sim.model.setOutage(.blackhole, at: .zero)
        let flow = sim.model.openFlow(at: .zero)
        sim.model.connect(flow, at: .zero, resolvesName: false)
        sim.run(until: .s(5))
        sim.model.setOutage(nil, at: .s(5))
        sim.run(until: .s(10))
        // SYNs at 0, 1 and 3 s are lost; the one at 7 s gets through.
        #expect(sim.notices.contains(.connected(flow, .established(at: .ms(7100), synRetransmits: 3))))
    }

    @Test func aBlackholeThatNeverEndsTimesTheConnectionOut() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        sim.model.setOutage(.blackhole, at: .zero)
        let flow = sim.model.openFlow(at: .zero)
        #expect(sim.connect(flow, at: .zero) == .timedOut(at: .s(127)))
    }

    @Test func refusingAnswersOneRoundTripLater() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        sim.model.setOutage(.refuse, at: .zero)
        let flow = sim.model.openFlow(at: .ms(10))
        #expect(sim.connect(flow, at: .ms(10)) == .refused(at: .ms(110)))
        #expect(sim.model.counters.refusedConnections == 1)
    }

    @Test func refusingLetsOpenConnectionsCarryOn() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.setOutage(.refuse, at: .zero)
        sim.model.send(flow, .down, bytes: 1000, at: .ms(5))
        sim.run(until: .s(1))
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .down, bytes: 1000, at: .ms(55))])
        #expect(sim.model.counters.outageDrops == 0)
    }

    @Test func anOpenTransferResumesByRetransmissionTimeoutAfterABlackhole() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.setOutage(.blackhole, at: .zero)
        sim.model.send(flow, .down, bytes: 1000, at: .zero)
        sim.run(until: .ms(2500))
        #expect(sim.deliveries.isEmpty)
        sim.model.setOutage(nil, at: .ms(2500))
        sim.run(until: .s(10))
        // Lost at 0 s; the retransmission at 1 s (RTO 1 s, no RTT sample yet) is lost too; the
        // next one waits a doubled RTO, leaves at 3 s and arrives 50 ms later. Nothing is lost.
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .down, bytes: 1000, at: .ms(3050))])
        #expect(sim.model.counters.outageDrops == 2)
    }

    @Test func resetDropsEveryOpenConnectionAndRefusesNewOnes() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        let first = sim.model.openFlow(at: .zero)
        let second = sim.model.openFlow(at: .zero)
        sim.model.send(first, .down, bytes: 10_000, at: .zero)
        sim.model.setOutage(.reset, at: .ms(20))
        sim.run(until: .s(1))
        #expect(sim.deliveries.isEmpty)
        #expect(sim.notices.contains(.cut(first, .reset, at: .ms(20))))
        #expect(sim.notices.contains(.cut(second, .reset, at: .ms(20))))
        #expect(sim.model.counters.resets == 2)
        #expect(sim.model.backlog(first, .down) == 0)
        let third = sim.model.openFlow(at: .s(1))
        #expect(sim.connect(third, at: .s(1)) == .refused(at: .ms(1100)))
    }

    @Test func aCutEndsTheOpenConnectionsOnceAndTheLinkStaysUp() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        let first = sim.model.openFlow(at: .zero)
        let second = sim.model.openFlow(at: .zero)
        sim.model.send(first, .down, bytes: 10_000, at: .zero)
        #expect(sim.model.cutConnections(.close, at: .ms(20)) == 2)
        sim.run(until: .s(1))
        #expect(sim.deliveries.isEmpty)
        #expect(sim.notices.contains(.cut(first, .close, at: .ms(20))))
        #expect(sim.notices.contains(.cut(second, .close, at: .ms(20))))
        #expect(sim.model.counters.closes == 2)
        #expect(sim.model.counters.resets == 0)
        #expect(sim.model.state.outage == nil)
        // A connection opened after the cut goes through, and so do its bytes.
        let third = sim.model.openFlow(at: .s(1))
        #expect(sim.connect(third, at: .s(1)) == .established(at: .ms(1100), synRetransmits: 0))
        sim.model.send(third, .down, bytes: 1000, at: .ms(1100))
        sim.run(until: .s(2))
        #expect(sim.deliveries.map(\.flow) == [third])
    }

    @Test func aScheduledOutageComesAndGoes() {
        var profile = Profile.test(latency: .milliseconds(10))
        let on = profile.conditions
        profile.schedule = ConditionSchedule(
            phases: [
                SchedulePhase(label: "street", duration: .init(exactly: .seconds(5)), conditions: on),
                SchedulePhase(label: "tunnel", duration: .init(exactly: .seconds(2)), conditions: on, outage: .refuse),
            ],
            repeats: true
        )
        var sim = LinkSimulation(profile)
        let early = sim.model.openFlow(at: .zero)
        #expect(sim.connect(early, at: .s(1)) == .established(at: .ms(1020), synRetransmits: 0))
        let during = sim.model.openFlow(at: .s(6))
        #expect(sim.connect(during, at: .s(6)) == .refused(at: .ms(6020)))
        let after = sim.model.openFlow(at: .s(7))
        #expect(sim.connect(after, at: .s(7)) == .established(at: .ms(7020), synRetransmits: 0))
    }
}

extension OutageTests {
    @Test func afterARefusalTheProxysAnswerCrossesTheLink() {
        var sim = LinkSimulation(.test(latency: .milliseconds(50)))
        sim.model.setOutage(.refuse, at: .zero)
        let flow = sim.model.openFlow(at: .zero)
        #expect(sim.connect(flow, at: .zero) == .refused(at: .ms(100)))
        // The 502 the proxy writes then reaches the client one way later.
        sim.model.send(flow, .down, bytes: 200, at: .ms(100))
        sim.run(until: .s(1))
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .down, bytes: 200, at: .ms(150))])
    }
}
