import Foundation
import Testing

@testable import NetcondCore

/// What a direction is at a moment: a step series' row, a mahimahi trace's rate over the next
/// 100 ms, a fixed profile's values; with the timeline's outage and stall.
@Suite struct LinkMomentTests {
    func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

    @Test func aSeriesGivesTheRowInForce() throws {
        let series = try LinkSeries.parse("0, 8mbit, 20ms, 0%\n1.5, 1mbit, 80ms, 2%\n", source: "s.csv")
        let direction = LinkDirection(series: series)
        #expect(direction.moment(at: self.ms(1_499)) == LinkMoment(rate: .mbit(8), delay: .milliseconds(20), loss: 0))
        #expect(
            direction.moment(at: self.ms(1_500)) == LinkMoment(rate: .mbit(1), delay: .milliseconds(80), loss: 0.02))
    }

    @Test func aTraceGivesTheRateOfTheNextHundredMilliseconds() throws {
        // An opportunity every 2 ms for the first 100 ms, then every 10 ms until 200 ms (the period).
        let fast: [Int64] = (1...50).map { Int64($0) * 2 }
        let slow: [Int64] = (1...10).map { 100 + Int64($0) * 10 }
        let times = fast + slow
        let trace = LinkTrace(milliseconds: times, source: "t.trace")
        let direction = LinkDirection(latency: .milliseconds(15), trace: trace)
        // 50 opportunities of 1,500 bytes in [1, 101 ms): 6 Mbit/s; 10 in [101, 201): 1.2 Mbit/s.
        #expect(direction.moment(at: self.ms(1)) == LinkMoment(rate: .mbit(6), delay: .milliseconds(15), loss: 0))
        #expect(direction.moment(at: self.ms(101)) == LinkMoment(rate: .kbit(1_200), delay: .milliseconds(15), loss: 0))
        // The file repeats: a period later, the same.
        #expect(direction.moment(at: self.ms(201)) == direction.moment(at: self.ms(1)))
    }

    @Test func aFixedDirectionIsItsProfileWithTheTimelinesOutageAndStall() {
        let profile = Profile(
            name: "fixed", up: LinkDirection(bandwidth: .kbit(500)),
            down: LinkDirection(latency: .milliseconds(100), bandwidth: .mbit(2), loss: .bernoulli(Probability(0.01))))
        var timeline = ConditionTimeline(profile: profile, seed: 1)
        #expect(timeline.moment(.down, at: .zero) == LinkMoment(rate: .mbit(2), delay: .milliseconds(100), loss: 0.01))
        #expect(timeline.moment(.up, at: .zero).rate == .kbit(500))
        timeline.setOutage(.blackhole, at: self.ms(10))
        timeline.setStall(.down, at: self.ms(10))
        let held = timeline.moment(.down, at: self.ms(10))
        #expect(held.outage == .blackhole && held.stalled)
        #expect(!timeline.moment(.up, at: self.ms(10)).stalled)
        #expect(LinkDirection().moment(at: .zero) == LinkMoment(rate: nil, delay: .zero, loss: 0))
    }
}
