import Testing

@testable import NetcondCore

/// Control traffic takes the delay of its moment: under a step series whose delay goes from 50 ms
/// to 400 ms each way at 10 s, what the stream engine times after the step (a refusal, a
/// firewall's refusal, an acknowledgement) is 400 ms-based, not the first row's 50 ms.
@Suite struct MomentInForceTests {
    /// 50 ms each way until 10 s, then 400 ms; no loss. Decoded as a file is: its `latency` is the
    /// first row's delay.
    static func slower(rate: String = "480kbit") throws -> Profile {
        let series = "0, \(rate), 50ms, 0%; 10, \(rate), 400ms, 0%"
        let yaml = "name: slower\nlink: {trace: {source: slower, series: \"\(series)\"}}"
        let profile = try ProfileDecoder().decode(yaml: yaml, file: "Profiles/slower.yaml")
        precondition(profile.up.latency == .milliseconds(50))
        return profile
    }

    @Test func theDelayInForceIsTheSeriesRowOfTheMoment() throws {
        let conditions = try Self.slower().conditions
        #expect(conditions.up.delay(at: .s(5)) == .milliseconds(50))
        #expect(conditions.up.delay(at: .s(20)) == .milliseconds(400))
        #expect(conditions.roundTrip(from: .s(20)) == .milliseconds(800))
        // The answer leaves the far end after the step: its leg takes the new delay.
        #expect(conditions.roundTrip(from: .ms(9_990)) == .milliseconds(450))
        #expect(LinkDirection(latency: .milliseconds(30)).delay(at: .s(20)) == .milliseconds(30))
    }

    @Test func aRefusalAfterTheStepComesOneNewRoundTripLater() throws {
        var sim = LinkSimulation(try Self.slower())
        sim.model.setOutage(.refuse, at: .s(2))
        let before = sim.model.openFlow(at: .s(2))
        #expect(sim.connect(before, at: .s(2)) == .refused(at: .ms(2_100)))
        let after = sim.model.openFlow(at: .s(20))
        #expect(sim.connect(after, at: .s(20)) == .refused(at: .ms(20_800)))
    }

    @Test func theFirewallsRefusalAfterTheStepComesOneNewRoundTripLater() throws {
        var profile = try Self.slower()
        profile.setup.allowPorts = [443]
        profile.setup.otherwise = .refuse
        var sim = LinkSimulation(profile)
        let flow = sim.model.openFlow(at: .s(20))
        #expect(sim.connect(flow, at: .s(20), port: 80) == .refusedByFirewall(at: .ms(20_800)))
    }

    @Test func aHandshakeAfterTheStepTakesTheNewRoundTrip() throws {
        // 60 bytes at 480 kbit/s take 1 ms on the link each way.
        var sim = LinkSimulation(try Self.slower())
        let before = sim.model.openFlow(at: .s(1))
        #expect(sim.connect(before, at: .s(1)) == .established(at: .ms(1_102), synRetransmits: 0))
        let after = sim.model.openFlow(at: .s(20))
        #expect(sim.connect(after, at: .s(20)) == .established(at: .ms(20_802), synRetransmits: 0))
    }

    @Test func acknowledgementsAfterTheStepTakeTheNewDelay() throws {
        // Ten segments go in the first window; the acknowledgements that open the next one come
        // back 400 ms after they arrive (at 20.8 s, not 20.45 s), so the rest arrive at 21.2 s.
        var sim = LinkSimulation(try Self.slower(rate: "1000mbit"))
        let flow = sim.model.openFlow(at: .s(20))
        sim.model.send(flow, .down, bytes: 1460 * 30, at: .s(20))
        sim.run(until: .s(25))
        #expect(sim.delivered(flow, .down, by: .ms(20_401)) == 1460 * 10)
        #expect(sim.delivered(flow, .down, by: .ms(21_100)) == 1460 * 10)
        #expect(sim.delivered(flow, .down, by: .ms(21_300)) == 1460 * 30)
    }
}
