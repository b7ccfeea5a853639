import Testing

@testable import NetcondCore

/// The packet link's reordering stage, in virtual time: a held-back packet arrives `gap` after its
/// latency, so the packets that depart within `gap` after it overtake it.
@Suite struct ReorderingTests {
    let latency = Span.milliseconds(20)

    @Test func offItNeverHoldsBackAndLeavesTheStreamUntouched() {
        var random = SeededRandom(seed: 5)
        var untouched = SeededRandom(seed: 5)
        let off = Reordering(chance: .zero, gap: .milliseconds(10))
        for n in 0..<100 {
            #expect(off.heldBack(departingAt: .ms(Int64(n)), latency: self.latency, random: &random) == nil)
        }
        #expect(random.next() == untouched.next())
    }

    @Test func aHeldPacketIsOvertakenByThoseThatDepartWithinTheGap() {
        var random = SeededRandom(seed: 5)
        let always = Reordering(chance: .one, gap: .milliseconds(10))
        let held = always.heldBack(departingAt: .ms(0), latency: self.latency, random: &random)
        #expect(held == .ms(30))
        // Packets behind it go through the delay line in order: one departing 1 ms later arrives at 21 ms.
        var line = DelayLine(latency: self.latency, jitter: .zero, seed: 1)
        #expect(line.arrival(departingAt: .ms(1)) < held!)
        #expect(line.arrival(departingAt: .ms(11)) > held!)
    }

    @Test func aQuarterHeldBackIsAboutAQuarter() {
        var random = SeededRandom(seed: 9)
        let quarter = Reordering(chance: Probability(0.25), gap: .milliseconds(10))
        let held = (0..<4000).filter { n in
            quarter.heldBack(departingAt: .ms(Int64(n)), latency: self.latency, random: &random) != nil
        }.count
        #expect((850...1150).contains(held), "\(held) of 4000")
    }
}
