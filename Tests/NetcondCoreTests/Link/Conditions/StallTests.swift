import Testing

@testable import NetcondCore

/// Stalls: no byte moves in the stalled direction, connections stay open, nothing is lost.
@Suite struct StallTests {
    static func stalling(
        _ profile: Profile = .test(latency: .milliseconds(10)),
        every: Span = .seconds(2),
        for duration: Span = .milliseconds(500),
        direction: StallDirection = .both
    ) -> Profile {
        var profile = profile
        profile.stalls = StallSpec(
            every: .init(exactly: every), duration: .init(exactly: duration), direction: direction)
        return profile
    }

    /// Bytes written during a stall wait at the bottleneck and cross the link when it ends.
    @Test func bytesSentDuringAStallCrossWhenItEnds() {
        var sim = LinkSimulation(Self.stalling())
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .down, bytes: 100, at: .ms(2100))
        sim.run(until: .ms(2509))
        #expect(sim.deliveries.isEmpty)
        sim.run(until: .s(3))
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .down, bytes: 100, at: .ms(2510))])
        #expect(sim.stateChanges.map(\.1) == [.zero, .ms(2000), .ms(2500)])
        #expect(sim.stateChanges[1].0.stalled == [.up, .down])
    }

    /// Bytes already past the bottleneck when a stall begins are held at the far end until it ends.
    @Test func bytesOnTheWayWhenAStallBeginsWaitForItsEnd() {
        var sim = LinkSimulation(Self.stalling())
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .down, bytes: 100, at: .ms(1995))
        sim.run(until: .s(3))
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .down, bytes: 100, at: .ms(2500))])
    }

    @Test func stallsRepeatEveryPeriod() {
        var sim = LinkSimulation(Self.stalling())
        sim.run(until: .s(7))
        // `every` runs from the start of one stall to the start of the next.
        #expect(sim.stateChanges.map(\.1) == [.zero, .ms(2000), .ms(2500), .ms(4000), .ms(4500), .ms(6000), .ms(6500)])
    }

    @Test func anUpStallLeavesTheDownDirectionMoving() {
        var sim = LinkSimulation(Self.stalling(direction: .up))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .up, bytes: 10, at: .ms(2100))
        sim.model.send(flow, .down, bytes: 20, at: .ms(2100))
        sim.run(until: .s(3))
        #expect(
            sim.deliveries == [
                Delivery(flow: flow, direction: .down, bytes: 20, at: .ms(2110)),
                Delivery(flow: flow, direction: .up, bytes: 10, at: .ms(2510)),
            ]
        )
    }

    @Test func aQueuedLinkResumesAtItsRate() {
        // 1460 + 40 bytes at 240 kbit/s take 50 ms each; the link serves nothing while stalled.
        let profile = Self.stalling(.test(latency: .milliseconds(100), bandwidth: .kbit(240)))
        var sim = LinkSimulation(profile)
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .down, bytes: 1460 * 2, at: .ms(2000))
        sim.run(until: .s(4))
        #expect(
            sim.deliveries == [
                Delivery(flow: flow, direction: .down, bytes: 1460, at: .ms(2650)),
                Delivery(flow: flow, direction: .down, bytes: 1460, at: .ms(2700)),
            ]
        )
    }

    @Test func aLiveStallHoldsUntilLifted() {
        var sim = LinkSimulation(.test(latency: .milliseconds(10)))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.setStall(.down, at: .ms(100))
        sim.model.send(flow, .down, bytes: 5000, at: .ms(200))
        sim.run(until: .s(10))
        #expect(sim.deliveries.isEmpty)
        #expect(sim.model.backlog(flow, .down) == 5000)
        sim.model.setStall(nil, at: .s(10))
        sim.run(until: .s(11))
        #expect(sim.deliveries == [Delivery(flow: flow, direction: .down, bytes: 5000, at: .ms(10_010))])
    }

    @Test func randomizedStallsStayInTheirRanges() {
        var profile = Profile.test(latency: .milliseconds(10))
        profile.stalls = StallSpec(
            every: .init(.seconds(10), .seconds(30)),
            duration: .init(.seconds(1), .seconds(5)),
            direction: .both
        )
        var sim = LinkSimulation(profile, seed: 3)
        sim.run(until: .s(600))
        let changes = sim.stateChanges.dropFirst().map(\.1)
        #expect(changes.count >= 40)
        var previousStart = Instant.zero
        for index in stride(from: 0, to: changes.count - 1, by: 2) {
            let start = changes[index]
            let length = changes[index + 1] - start
            #expect(length >= .seconds(1) && length <= .seconds(5))
            #expect(start - previousStart >= .seconds(10) && start - previousStart <= .seconds(30))
            previousStart = start
        }
    }
}
