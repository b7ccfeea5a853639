import Foundation
import Testing

@testable import NetcondCore
@testable import NetcondScenario

/// The `radio` check on hand-made evidence: a client that polls keeps the radio on and fails, one
/// that batches lets it sleep and passes; the evidence line says what decided it.
@Suite struct RadioCheckTests {
    static let check = RadioCheck(maxOnShare: Probability(0.4), maxPromotionsPerMinute: 2)

    /// LTE's radio driven by `moments` (seconds), over a run of `seconds`.
    func evidence(_ moments: [Double], seconds: Double, engine: RunEvidence.Engine = .packet) -> RunEvidence {
        var model = RadioModel(spec: .defaults(.lte))
        for moment in moments { model.note(at: .zero + .seconds(double: moment)) }
        let end = Instant.zero + .seconds(double: seconds)
        var evidence = RunEvidence(
            exit: .exited(0), timedOut: false, deadline: .seconds(90), duration: seconds, requests: [],
            workingDirectory: "/nonexistent", origin: OriginContent())
        evidence.engine = engine
        evidence.radio = RadioReport(spec: model.spec, intervals: model.intervals(upTo: end), from: .zero, to: end)
        return evidence
    }

    /// A request every 5 s for a minute (two packets each): the 10 s tail never ends.
    @Test func pollingEveryFiveSecondsFails() {
        let moments = stride(from: 0.0, to: 60, by: 5).flatMap { [$0, $0 + 0.05] }
        let result = Checks.evaluate(.radio(Self.check), self.evidence(moments, seconds: 60))
        #expect(!result.passed)
        #expect(
            result.evidence.hasPrefix("radio on 60.0 s of 60.0 s (100%), 1 promotion (1.0/min), ≈ "),
            "\(result.evidence)")
        #expect(result.evidence.hasSuffix("; allowed ≤ 40%, ≤ 2/min"), "\(result.evidence)")
        #expect(result.details.contains("on 100% of the run, more than 40%"))
        #expect(result.caveat == nil)
        #expect(result.marks == [0, 60])
    }

    /// Two batches, at 30 s and at 60 s (hand computation: idle to 30 s; promotion 0.26 s, active
    /// 0.1 s, tail 10 s; idle to 60 s; promotion, active, and the tail's first 0.14 s before the
    /// end at 60.5 s: on 10.86 s, 18%; 2 promotions in 60.5 s, 1.98 a minute; ≈ 12.61 J).
    @Test func twoBatchesPass() {
        let result = Checks.evaluate(.radio(Self.check), self.evidence([30, 30.05, 60, 60.05], seconds: 60.5))
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence == "radio on 10.9 s of 60.5 s (18%), 2 promotions (2.0/min), ≈ 13 J; allowed ≤ 40%, ≤ 2/min"
        )
        #expect(result.marks == [30, 60, 60.5])
    }

    /// A request every 15 s: the radio sleeps between them (on 69%), but wakes four times a minute.
    @Test func wakingTooOftenFailsThePromotionLimit() {
        let moments = stride(from: 0.0, to: 60, by: 15).flatMap { [$0, $0 + 0.05] }
        let result = Checks.radio(RadioCheck(maxPromotionsPerMinute: 2), self.evidence(moments, seconds: 60))
        #expect(!result.passed)
        #expect(result.evidence.contains("4 promotions (4.0/min)"), "\(result.evidence)")
        #expect(result.details.contains("4.0 promotions a minute, more than 2"))
    }

    @Test func noRadioToJudgeFails() {
        var evidence = self.evidence([], seconds: 10)
        evidence.radio = nil
        let result = Checks.radio(Self.check, evidence)
        #expect(!result.passed)
        #expect(result.evidence == "no radio to judge: the run's profile has no radio: key (e.g. radio: lte)")
    }

    /// Through the proxy the radio sees the link's segments, not the client's own packets: a verdict
    /// close to its limit says so; one far from it, or under the packet engine, does not.
    @Test func aVerdictNearItsLimitThroughTheProxyIsMarked() {
        // One batch at 0 s in a 27 s run: on 10.36 s, 38% against 40%.
        let near = Checks.evaluate(
            .radio(RadioCheck(maxOnShare: Probability(0.4))), self.evidence([0, 0.05], seconds: 27, engine: .stream))
        #expect(near.passed)
        #expect(near.caveat?.contains("this verdict is close to its limit (on 38% against 40%)") == true)
        let packet = Checks.evaluate(
            .radio(RadioCheck(maxOnShare: Probability(0.4))), self.evidence([0, 0.05], seconds: 27, engine: .packet))
        #expect(packet.caveat == nil)
        // A client that sent nothing: nothing the proxy could have missed.
        let idle = Checks.evaluate(.radio(Self.check), self.evidence([], seconds: 0.01, engine: .stream))
        #expect(idle.passed && idle.caveat == nil, "\(idle.caveat ?? "")")
        // One promotion in 30 s against 2 a minute (1 allowed in the run): one more would fail it.
        let limit = Checks.evaluate(
            .radio(RadioCheck(maxPromotionsPerMinute: 2)), self.evidence([0], seconds: 30, engine: .stream))
        #expect(limit.caveat?.contains("(1 promotion against 1.0 allowed in the run)") == true, "\(limit.caveat ?? "")")
        let far = Checks.evaluate(
            .radio(RadioCheck(maxOnShare: Probability(0.4))), self.evidence([0, 0.05], seconds: 60, engine: .stream))
        #expect(far.caveat == nil)
    }
}
