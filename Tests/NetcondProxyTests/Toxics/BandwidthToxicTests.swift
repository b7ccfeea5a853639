import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct BandwidthToxicTests {
    @Test func aChunkGoesOnOnceItsBytesAtTheRateHavePassed() {
        // 10 KB/s: 10 bytes a millisecond.
        var toxic = BandwidthToxic(rate: 10)
        var random = SeededRandom(seed: 1)
        #expect(toxic.take(data(bytes(500), at: 0), now: t(0), random: &random) == [.hold(until: t(50))])
        #expect(toxic.wake(now: t(50), random: &random) == [.pass(data(bytes(500), at: 0))])
        #expect(toxic.owed == 0)
    }

    @Test func aLargeChunkGoesOnA100MillisecondPieceAtATime() {
        var toxic = BandwidthToxic(rate: 10)
        var random = SeededRandom(seed: 1)
        let chunk = String((0..<2_500).map { Character(UnicodeScalar(UInt8(65 + $0 % 26))) })
        let text = Array(chunk)
        #expect(toxic.take(data(chunk, at: 0), now: t(0), random: &random) == [.hold(until: t(100))])
        #expect(
            toxic.wake(now: t(100), random: &random) == [
                .pass(data(String(text[0..<1_000]), at: 0)), .hold(until: t(200)),
            ])
        #expect(
            toxic.wake(now: t(200), random: &random) == [
                .pass(data(String(text[1_000..<2_000]), at: 0)), .hold(until: t(250)),
            ])
        #expect(toxic.wake(now: t(250), random: &random) == [.pass(data(String(text[2_000...]), at: 0))])
        #expect(toxic.owed == 0)
    }

    @Test func aLateTimerIsMadeUpOnTheNextSleep() {
        var toxic = BandwidthToxic(rate: 10)
        var random = SeededRandom(seed: 1)
        _ = toxic.take(data(bytes(500), at: 0), now: t(0), random: &random)
        // Fired 10 ms late: the next 50 ms sleep is 40 ms.
        _ = toxic.wake(now: t(60), random: &random)
        #expect(toxic.owed == -10_000_000)
        #expect(toxic.take(data(bytes(500), at: 60), now: t(60), random: &random) == [.hold(until: t(100))])
        // A chunk that owes less than the overshoot goes at once.
        var early = BandwidthToxic(rate: 10)
        _ = early.take(data(bytes(500), at: 0), now: t(0), random: &random)
        _ = early.wake(now: t(80), random: &random)
        #expect(early.take(data(bytes(100), at: 80), now: t(80), random: &random) == [.pass(data(bytes(100), at: 80))])
    }

    @Test func rateZeroAndTheEndPassAtOnce() {
        var free = BandwidthToxic(rate: 0)
        var random = SeededRandom(seed: 1)
        let chunk = data(bytes(100_000), at: 0)
        #expect(free.take(chunk, now: t(0), random: &random) == [.pass(chunk)])
        var toxic = BandwidthToxic(rate: 10)
        #expect(toxic.take(.end(.close), now: t(0), random: &random) == [.pass(.end(.close))])
    }

    @Test func anInterruptHandsOnWhatIsLeftOfTheChunk() {
        var toxic = BandwidthToxic(rate: 10)
        var random = SeededRandom(seed: 1)
        _ = toxic.take(data(bytes(1_500), at: 0), now: t(0), random: &random)
        _ = toxic.wake(now: t(100), random: &random)
        #expect(toxic.interrupt() == [data(bytes(500), at: 0)])
        #expect(toxic.interrupt() == [])
    }
}
