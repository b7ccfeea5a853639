import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct LatencyToxicTests {
    @Test func aChunkIsHeldUntilItsReadPlusTheLatencyAndThenPassed() {
        var toxic = LatencyToxic(latency: .milliseconds(100), jitter: .zero)
        var random = SeededRandom(seed: 1)
        #expect(toxic.take(data("a", at: 0), now: t(0), random: &random) == [.hold(until: t(100))])
        // Passed with the moment it counts from now: a latency after it does not count it again.
        #expect(toxic.wake(now: t(100), random: &random) == [.pass(data("a", at: 100))])
        #expect(toxic.wake(now: t(200), random: &random) == [])
    }

    @Test func aChunkReadLongAgoGoesOnAtOnceFromItsOwnRead() {
        var toxic = LatencyToxic(latency: .milliseconds(100), jitter: .zero)
        var random = SeededRandom(seed: 1)
        // Read at 30, taken at 150 (it waited behind another): due at 130, already past.
        #expect(toxic.take(data("b", at: 30), now: t(150), random: &random) == [.pass(data("b", at: 130))])
        #expect(toxic.take(data("c", at: 140), now: t(150), random: &random) == [.hold(until: t(240))])
    }

    @Test func theEndPassesAtOnce() {
        var toxic = LatencyToxic(latency: .milliseconds(100), jitter: .zero)
        var random = SeededRandom(seed: 1)
        #expect(toxic.take(.end(.eof), now: t(0), random: &random) == [.pass(.end(.eof))])
    }

    @Test func jitterDrawsAWholeMillisecondFromTheSeed() {
        var toxic = LatencyToxic(latency: .milliseconds(100), jitter: .milliseconds(20))
        var random = SeededRandom(seed: 42)
        var mirror = SeededRandom(seed: 42)
        var delays: [Int64] = []
        for i in 0..<200 {
            let now = Int64(i) * 1_000
            let expected = 100 + Int64.random(in: 0..<40, using: &mirror) - 20
            #expect(toxic.take(data("x", at: now), now: t(now), random: &random) == [.hold(until: t(now + expected))])
            #expect(toxic.wake(now: t(now + expected), random: &random) == [.pass(data("x", at: now + expected))])
            delays.append(expected)
        }
        #expect(delays.allSatisfy { (80..<120).contains($0) } && Set(delays).count > 20)
    }

    @Test func anInterruptHandsOnTheHeldChunkOnce() {
        var toxic = LatencyToxic(latency: .milliseconds(500), jitter: .zero)
        var random = SeededRandom(seed: 1)
        _ = toxic.take(data("held", at: 0), now: t(0), random: &random)
        #expect(toxic.interrupt() == [data("held", at: 500)])
        #expect(toxic.interrupt() == [])
        #expect(toxic.wake(now: t(500), random: &random) == [])
    }
}
