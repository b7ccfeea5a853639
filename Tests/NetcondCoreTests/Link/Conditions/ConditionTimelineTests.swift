import Testing

@testable import NetcondCore

/// The timeline both engines read their conditions from, alone, in virtual time.
@Suite struct ConditionTimelineTests {
    static let fast = LinkConditions(
        up: LinkDirection(latency: .milliseconds(20)), down: LinkDirection(latency: .milliseconds(20)))
    static let slow = LinkConditions(
        up: LinkDirection(latency: .milliseconds(400)), down: LinkDirection(latency: .milliseconds(400)))

    static func commute(repeats: Bool = true, tunnel: SpanRange = SpanRange(exactly: .seconds(2))) -> Profile {
        var profile = Profile.test(latency: .milliseconds(5))
        profile.name = "commute"
        profile.schedule = ConditionSchedule(
            phases: [
                SchedulePhase(label: "lte", duration: SpanRange(exactly: .seconds(10)), conditions: Self.fast),
                SchedulePhase(label: "tunnel", duration: tunnel, conditions: Self.slow, outage: .blackhole),
            ],
            repeats: repeats
        )
        return profile
    }

    @Test func phasesFollowEachOtherAndRepeat() {
        var timeline = ConditionTimeline(profile: Self.commute(), seed: 1)
        #expect(timeline.state == LinkState(phase: "lte"))
        #expect(timeline.conditions == Self.fast)
        #expect(timeline.nextChange == .s(10))
        timeline.advance(to: .s(11))
        #expect(timeline.state == LinkState(phase: "tunnel", outage: .blackhole))
        #expect(timeline.conditions == Self.slow)
        timeline.advance(to: .s(12))
        #expect(timeline.state == LinkState(phase: "lte"))
        #expect(timeline.nextChange == .s(22))
    }

    @Test func aScheduleThatEndsGoesBackToTheProfile() {
        var timeline = ConditionTimeline(profile: Self.commute(repeats: false), seed: 1)
        timeline.advance(to: .s(30))
        #expect(timeline.state == LinkState(phase: "commute"))
        #expect(timeline.conditions == Self.commute().conditions)
        #expect(timeline.nextChange == nil)
    }

    @Test func drawnDurationsRepeatWithTheSeedAndDifferWithAnother() {
        func changes(seed: UInt64) -> [Instant] {
            var timeline = ConditionTimeline(
                profile: Self.commute(tunnel: SpanRange(.seconds(1), .seconds(9))), seed: seed)
            var moments: [Instant] = []
            timeline.advance(to: .s(100)) { moments.append($0.now) }
            return moments
        }
        #expect(changes(seed: 7) == changes(seed: 7))
        #expect(changes(seed: 7) != changes(seed: 8))
        #expect(changes(seed: 7).count >= 10)
    }

    @Test func eachMomentSeesTheStateOfThatMomentInOrder() {
        var timeline = ConditionTimeline(profile: Self.commute(), seed: 1)
        var seen: [(Instant, String)] = []
        timeline.advance(to: .s(25)) { seen.append(($0.now, $0.state.phase)) }
        #expect(seen.map(\.0) == [.s(10), .s(12), .s(22), .s(24)])
        #expect(seen.map(\.1) == ["tunnel", "lte", "tunnel", "lte"])
        #expect(timeline.now == .s(25))
    }

    @Test func aLiveOutageOverridesThePhaseAndEndsOnlyWhenTold() {
        var timeline = ConditionTimeline(profile: Self.commute(), seed: 1)
        timeline.setOutage(.reset, at: .s(1))
        #expect(timeline.outage == .reset)
        timeline.advance(to: .s(11))
        #expect(timeline.outage == .reset)  // the live layer beats the tunnel's blackhole
        timeline.setOutage(nil, at: .s(11))
        #expect(timeline.outage == .blackhole)
        timeline.advance(to: .s(13))
        #expect(timeline.outage == nil)
    }

    @Test func periodicStallsComeAndGoOnTheirDirection() {
        var profile = Profile.test()
        profile.stalls = StallSpec(
            every: SpanRange(exactly: .seconds(5)), duration: SpanRange(exactly: .seconds(1)), direction: .down)
        var timeline = ConditionTimeline(profile: profile, seed: 3)
        #expect(!timeline.isStalled(.down))
        timeline.advance(to: .ms(5500))
        #expect(timeline.isStalled(.down) && !timeline.isStalled(.up))
        #expect(timeline.state.stalled == [.down])
        timeline.advance(to: .ms(6500))
        #expect(!timeline.isStalled(.down))
        timeline.setStall(.both, at: .s(7))
        #expect(timeline.isStalled(.up) && timeline.isStalled(.down))
    }

    @Test func switchingProfileRestartsItsScheduleAndDropsTheOldOnes() {
        var timeline = ConditionTimeline(profile: Self.commute(), seed: 1)
        timeline.advance(to: .s(5))
        timeline.switchProfile(to: Profile.test(latency: .milliseconds(1)), at: .s(5))
        #expect(timeline.nextChange == nil)
        let changed = timeline.advance(to: .s(60))
        #expect(!changed)  // the old schedule's phase change at 10 s is gone
        timeline.switchProfile(to: Self.commute(), at: .s(60))
        #expect(timeline.state.phase == "lte")
        #expect(timeline.nextChange == .s(70))
    }
}
