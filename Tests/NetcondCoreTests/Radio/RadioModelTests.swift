import Foundation
import Testing

@testable import NetcondCore

/// The radio's state machine in virtual time: its totals against a hand computation for three
/// packet timelines, and the moments the link gives it.
@Suite struct RadioModelTests {
    static func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

    static func run(_ spec: RadioSpec, moments: [Int64], window: (Int64, Int64)) -> (RadioModel, RadioReport) {
        var model = RadioModel(spec: spec)
        for moment in moments { model.note(at: Self.ms(moment)) }
        let end = Self.ms(window.1)
        let report = RadioReport(
            spec: spec, intervals: model.intervals(upTo: end), from: Self.ms(window.0), to: end)
        return (model, report)
    }

    static func expectClose(
        _ value: Double, _ expected: Double, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(abs(value - expected) < 1e-9, "\(value) is not \(expected)", sourceLocation: sourceLocation)
    }

    /// One request at 1 s (packets at 1.00, 1.05, 1.10 s), LTE (promotion 0.26 s at 1.21 W,
    /// active 1.2 W for 0.1 s after the last packet, tail 10 s at 1.06 W, idle 0.02 W), 20 s run.
    ///
    /// ```
    ///  idle       [0, 1.00)          1.00 s × 0.02 W = 0.0200 J
    ///  promotion  [1.00, 1.26)       0.26 s × 1.21 W = 0.3146 J   (1.05 and 1.10 come during it:
    ///  active     [1.26, 1.36)       0.10 s × 1.20 W = 0.1200 J    the timers start at its end)
    ///  tail       [1.36, 11.36)     10.00 s × 1.06 W = 10.6000 J
    ///  idle       [11.36, 20)        8.64 s × 0.02 W = 0.1728 J
    ///  on 10.36 s of 20 s = 51.8 %; 1 promotion = 3 a minute; 11.2274 J
    /// ```
    @Test func oneRequestWakesTheLTERadioOnce() {
        let (_, report) = Self.run(.defaults(.lte), moments: [1000, 1050, 1100], window: (0, 20_000))
        #expect(
            report.intervals == [
                .init(state: .idle, start: 0, end: 1.0), .init(state: .promotion, start: 1.0, end: 1.26),
                .init(state: .active, start: 1.26, end: 1.36), .init(state: .tail, start: 1.36, end: 11.36),
                .init(state: .idle, start: 11.36, end: 20),
            ])
        Self.expectClose(report.onSeconds, 10.36)
        Self.expectClose(report.onShare, 0.518)
        #expect(report.promotions == 1)
        Self.expectClose(report.promotionsPerMinute, 3)
        Self.expectClose(report.joules, 11.2274)
        #expect(report.summary == "radio (lte): on 10.4 s of 20.0 s (52%), 1 promotion (3.0/min), ≈ 11 J")
    }

    /// Polling every 3 s (packets at t and t + 0.05 s for t = 0, 3, 6, 9), LTE, 12 s run: the tail
    /// (10 s) never ends, so the radio is on the whole run after one promotion.
    ///
    /// ```
    ///  promotion  [0, 0.26)                                         0.26 s × 1.21 W = 0.3146 J
    ///  active     [0.26, 0.36) [3, 3.15) [6, 6.15) [9, 9.15)        0.55 s × 1.20 W = 0.6600 J
    ///  tail       [0.36, 3) [3.15, 6) [6.15, 9) [9.15, 12)          2.64 + 2.85 × 3 = 11.19 s × 1.06 W = 11.8614 J
    ///  on 12 s of 12 s = 100 %; 1 promotion = 5 a minute; 12.836 J
    /// ```
    @Test func pollingEveryThreeSecondsKeepsItOn() {
        let (model, report) = Self.run(
            .defaults(.lte), moments: [0, 50, 3000, 3050, 6000, 6050, 9000, 9050], window: (0, 12_000))
        #expect(
            report.intervals.map(\.state) == [
                .promotion, .active, .tail, .active, .tail, .active, .tail, .active, .tail,
            ])
        #expect(report.intervals.last == .init(state: .tail, start: 9.15, end: 12))
        Self.expectClose(report.seconds[.active] ?? 0, 0.55)
        Self.expectClose(report.seconds[.tail] ?? 0, 11.19)
        Self.expectClose(report.onShare, 1)
        #expect(report.promotions == 1 && model.promotions == 1)
        Self.expectClose(report.promotionsPerMinute, 5)
        Self.expectClose(report.joules, 12.836)
    }

    /// 3G (promotion 2 s at 0.53 W; DCH 0.7 W: active 0.1 s, tail 4.9 s; FACH 12 s at 0.35 W; idle
    /// 0 W): packets at 0, 10 s (in FACH: active again, no promotion) and 40 s (idle since 27 s: a
    /// second promotion); 45 s run.
    ///
    /// ```
    ///  promotion    [0, 2) [40, 42)                      4.0 s × 0.53 W = 2.12 J
    ///  active       [2, 2.1) [10, 10.1) [42, 42.1)       0.3 s × 0.70 W = 0.21 J
    ///  tail         [2.1, 7) [10.1, 15) [42.1, 45)      12.7 s × 0.70 W = 8.89 J
    ///  second-tail  [7, 10) [15, 27)                    15.0 s × 0.35 W = 5.25 J
    ///  idle         [27, 40)                            13.0 s × 0 W
    ///  on 32 s of 45 s = 71.1 %; 2 promotions = 2.667 a minute; 16.47 J
    ///  from 5 s on (a 40 s window): on 27 s, 1 promotion (at 40 s)
    /// ```
    @Test func threeGFallsToFACHThenIdleAndWakesAgain() {
        let spec = RadioSpec.defaults(.threeG)
        let (_, report) = Self.run(spec, moments: [0, 10_000, 40_000], window: (0, 45_000))
        #expect(
            report.intervals == [
                .init(state: .promotion, start: 0, end: 2), .init(state: .active, start: 2, end: 2.1),
                .init(state: .tail, start: 2.1, end: 7), .init(state: .secondTail, start: 7, end: 10),
                .init(state: .active, start: 10, end: 10.1), .init(state: .tail, start: 10.1, end: 15),
                .init(state: .secondTail, start: 15, end: 27), .init(state: .idle, start: 27, end: 40),
                .init(state: .promotion, start: 40, end: 42), .init(state: .active, start: 42, end: 42.1),
                .init(state: .tail, start: 42.1, end: 45),
            ])
        Self.expectClose(report.onSeconds, 32)
        Self.expectClose(report.onShare, 32.0 / 45)
        #expect(report.promotions == 2)
        Self.expectClose(report.promotionsPerMinute, 2 * 60.0 / 45)
        Self.expectClose(report.joules, 16.47)

        var model = RadioModel(spec: spec)
        for moment: Int64 in [0, 10_000, 40_000] { model.note(at: Self.ms(moment)) }
        let later = RadioReport(
            spec: spec, intervals: model.intervals(upTo: Self.ms(45_000)), from: Self.ms(5_000), to: Self.ms(45_000))
        Self.expectClose(later.onSeconds, 27)
        #expect(later.promotions == 1)
        #expect(later.intervals.first == .init(state: .tail, start: 0, end: 2))
    }

    /// A moment that comes before the latest (two engines' clocks a little apart) counts as at it.
    @Test func aLateMomentCountsAsTheLatest() {
        var model = RadioModel(spec: .defaults(.wifi))
        model.note(at: Self.ms(1000))
        model.note(at: Self.ms(900))
        #expect(model.intervals(upTo: Self.ms(2000)).map(\.state) == [.idle, .active, .tail, .idle])
        #expect(model.promotions == 1)
    }

    /// A profile switch keeps the state; what was drawn before keeps its power.
    @Test func aSwitchKeepsTheStateAndThePowersDrawn() {
        var model = RadioModel(spec: .defaults(.lte))
        model.note(at: Self.ms(0))
        model.switchSpec(to: .defaults(.threeG), at: Self.ms(5000))
        let intervals = model.intervals(upTo: Self.ms(30_000))
        // LTE's tail up to the switch at its power, then 3G's (the same tail, begun at 0.36 s,
        // with 3G's lengths: 4.9 s, then 12 s of FACH).
        #expect(intervals.map(\.state) == [.promotion, .active, .tail, .tail, .secondTail, .idle])
        #expect(intervals[2].power == Power(milliwatts: 1060) && intervals[2].end == Self.ms(5000))
        #expect(intervals[3].power == Power(milliwatts: 700) && intervals[3].end == Self.ms(5260))
        #expect(intervals[4].end == Self.ms(17_260))
        #expect(model.promotions == 1)
    }

    /// Both engines drive the radio through ``LinkNetwork``: an up unit when it is offered (the
    /// device sends it, lost or not), a down unit when the access link delivers it to the device.
    @Test func theNetworkTellsTheRadioAtTheDevicesEnd() throws {
        var profile = Profile(name: "r", down: LinkDirection(latency: .milliseconds(50)), radio: .defaults(.lte))
        profile.up.loss = .bernoulli(Probability(1))
        var network = LinkNetwork<Int, Int>(
            access: ConditionTimeline(profile: profile, seed: 1), routes: [], seed: 1)
        // Up at 1 s: lost on the way, but the radio sent it.
        #expect(network.offer(1, .up, route: nil, bytes: 100, connection: nil, at: Self.ms(1000)) == .dropped(.lost))
        // Down at 20 s: the device hears it 50 ms later, when it arrives.
        _ = network.offer(2, .down, route: nil, bytes: 100, connection: nil, at: Self.ms(20_000))
        while network.popEvent(upTo: Self.ms(30_000)) != nil {}
        let radio = try #require(network.radio)
        let intervals = radio.intervals(upTo: Self.ms(30_000))
        #expect(intervals.filter { $0.state == .promotion }.map(\.start) == [Self.ms(1000), Self.ms(20_050)])
        #expect(radio.promotions == 2)
    }

    /// The stream engine's link model hands its segments to the same network: a profile with a
    /// radio is never relayed past the model, and its radio sees a transfer.
    @Test func theStreamEnginesModelFeedsIt() throws {
        var profile = Profile(name: "r", radio: .defaults(.lte))
        let model = LinkModel(profile: profile, seed: 1)
        #expect(!model.isTransparent)
        let flow = model.openFlow(at: Self.ms(2000))
        model.send(flow, .down, bytes: 10_000, at: Self.ms(2000))
        _ = model.advance(to: Self.ms(5000))
        let radio = try #require(model.radio)
        #expect(radio.promotions == 1)
        #expect(radio.intervals(upTo: Self.ms(5000)).first { $0.state == .promotion }?.start == Self.ms(2000))
        profile.radio = nil
        #expect(LinkModel(profile: profile, seed: 1).radio == nil)
    }

    /// A profile switch with a radio changes its constants and keeps its state; one without keeps
    /// the radio in force.
    @Test func aProfileSwitchChangesTheConstantsAndKeepsTheState() throws {
        let model = LinkModel(profile: Profile(name: "a", radio: .defaults(.lte)), seed: 1)
        let flow = model.openFlow(at: Self.ms(0))
        model.send(flow, .down, bytes: 1000, at: Self.ms(0))
        _ = model.advance(to: Self.ms(2000))
        model.switchProfile(to: Profile(name: "b", radio: .defaults(.threeG)), at: Self.ms(2000))
        #expect(model.radio?.spec == .defaults(.threeG))
        model.switchProfile(to: Profile(name: "c"), at: Self.ms(3000))
        let radio = try #require(model.radio)
        #expect(radio.spec == .defaults(.threeG) && radio.promotions == 1)
        // LTE's tail until the switch, 3G's (4.9 s from 0.36 s, then 12 s of FACH) after it.
        let tails = radio.intervals(upTo: Self.ms(30_000)).filter { $0.state == .tail }
        #expect(tails.map(\.power) == [Power(milliwatts: 1060), Power(milliwatts: 700)])
    }
}
