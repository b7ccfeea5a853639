import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct SlowCloseToxicTests {
    @Test func dataPassesAndTheEndIsHeldItsDelay() {
        var toxic = SlowCloseToxic(delay: .milliseconds(300))
        var random = SeededRandom(seed: 1)
        #expect(toxic.take(data("a", at: 0), now: t(0), random: &random) == [.pass(data("a", at: 0))])
        #expect(toxic.take(.end(.close), now: t(20), random: &random) == [.hold(until: t(320))])
        #expect(toxic.wake(now: t(320), random: &random) == [.pass(.end(.close))])
        #expect(toxic.wake(now: t(400), random: &random) == [])
    }

    @Test func anInterruptHandsOnTheHeldEnd() {
        var toxic = SlowCloseToxic(delay: .milliseconds(300))
        var random = SeededRandom(seed: 1)
        _ = toxic.take(.end(.eof), now: t(0), random: &random)
        #expect(toxic.interrupt() == [.end(.eof)])
        #expect(toxic.interrupt() == [])
    }
}
