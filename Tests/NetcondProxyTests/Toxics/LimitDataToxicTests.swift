import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct LimitDataToxicTests {
    @Test func exactlyTheLimitPassesThenTheStreamCloses() {
        var toxic = LimitDataToxic(limit: 10)
        var random = SeededRandom(seed: 1)
        #expect(toxic.take(data("0123456", at: 0), now: t(0), random: &random) == [.pass(data("0123456", at: 0))])
        #expect(
            toxic.take(data("789abcdef", at: 1), now: t(1), random: &random) == [
                .drop(bytes: 6), .pass(data("789", at: 1)), .cut(.close),
            ])
        #expect(toxic.passed == 10)
    }

    @Test func aChunkThatEndsAtTheLimitClosesBehindIt() {
        var toxic = LimitDataToxic(limit: 4)
        var random = SeededRandom(seed: 1)
        #expect(
            toxic.take(data("abcd", at: 0), now: t(0), random: &random) == [.pass(data("abcd", at: 0)), .cut(.close)])
        #expect(toxic.take(.end(.eof), now: t(0), random: &random) == [.pass(.end(.eof))])
    }

    @Test func anUpdateKeepsTheCount() {
        var toxic = LimitDataToxic(limit: 100)
        var random = SeededRandom(seed: 1)
        _ = toxic.take(data(bytes(10), at: 0), now: t(0), random: &random)
        // Lowered to 8 after 10 passed: the next chunk closes the stream and passes nothing.
        var updated = Toxic.Kind.limitData(bytes: 8).behaviour(replacing: toxic, onLink: false)
        #expect(updated.take(data("x", at: 1), now: t(1), random: &random) == [.drop(bytes: 1), .cut(.close)])
        // A new toxic starts from 0.
        var fresh = Toxic.Kind.limitData(bytes: 8).behaviour(onLink: false)
        #expect(fresh.take(data("x", at: 1), now: t(1), random: &random) == [.pass(data("x", at: 1))])
    }
}
