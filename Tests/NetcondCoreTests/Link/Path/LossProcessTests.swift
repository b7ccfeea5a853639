import Testing

@testable import NetcondCore

@Suite struct LossProcessTests {
    func rate(_ spec: LossSpec, seed: UInt64 = 1, count: Int = 200_000) -> (rate: Double, meanBurst: Double) {
        var process = LossProcess(spec: spec, seed: seed)
        var lost = 0
        var bursts = 0
        var previous = false
        for _ in 0..<count {
            let now = process.nextIsLost()
            if now { lost += 1 }
            if now && !previous { bursts += 1 }
            previous = now
        }
        return (Double(lost) / Double(count), bursts == 0 ? 0 : Double(lost) / Double(bursts))
    }

    @Test func noneNeverLosesAndTotalAlwaysLoses() {
        #expect(self.rate(.none).rate == 0)
        #expect(self.rate(.bernoulli(.one)).rate == 1)
    }

    @Test func bernoulliHitsItsRateWithShortBursts() {
        let measured = self.rate(.bernoulli(Probability(0.02)))
        #expect(abs(measured.rate - 0.02) < 0.002)
        #expect(measured.meanBurst < 1.1)
    }

    @Test func gilbertElliottHitsItsMeanRateInLongBursts() {
        let spec = LossSpec.gilbertElliott(
            p: Probability(0.01), r: Probability(0.25), lossInGood: .zero, lossInBad: .one)
        let measured = self.rate(spec)
        #expect(abs(measured.rate - spec.meanRate) < 0.004)
        // Mean burst length 1/r = 4 segments.
        #expect(abs(measured.meanBurst - 4) < 0.5)
    }

    @Test func sameSeedSameDecisions() {
        var a = LossProcess(spec: .bernoulli(Probability(0.3)), seed: 9)
        var b = LossProcess(spec: .bernoulli(Probability(0.3)), seed: 9)
        var c = LossProcess(spec: .bernoulli(Probability(0.3)), seed: 10)
        let first = (0..<100).map { _ in a.nextIsLost() }
        #expect(first == (0..<100).map { _ in b.nextIsLost() })
        #expect(first != (0..<100).map { _ in c.nextIsLost() })
    }
}
