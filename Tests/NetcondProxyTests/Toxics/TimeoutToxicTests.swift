import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct TimeoutToxicTests {
    @Test func dataIsDroppedAndEachChunkStartsTheClockAgain() {
        var toxic = TimeoutToxic(timeout: .milliseconds(300))
        var random = SeededRandom(seed: 1)
        #expect(toxic.start(now: t(0)) == [.alarm(at: t(300))])
        #expect(
            toxic.take(data("dropped", at: 200), now: t(200), random: &random) == [
                .alarm(at: t(500)), .drop(bytes: 7),
            ])
        #expect(toxic.wake(now: t(500), random: &random) == [.cut(.close)])
    }

    @Test func zeroNeverClosesAndTheEndPasses() {
        var toxic = TimeoutToxic(timeout: .zero)
        var random = SeededRandom(seed: 1)
        #expect(toxic.start(now: t(0)) == [])
        #expect(toxic.take(data("x", at: 5), now: t(5), random: &random) == [.drop(bytes: 1)])
        #expect(toxic.take(.end(.eof), now: t(6), random: &random) == [.pass(.end(.eof))])
    }

    @Test func onALinkTheDataGoesOnAndTheLinkHoldsIt() {
        var toxic = TimeoutToxic(timeout: .milliseconds(100), onLink: true)
        var random = SeededRandom(seed: 1)
        #expect(
            toxic.take(data("held by the link", at: 10), now: t(10), random: &random) == [
                .alarm(at: t(110)), .pass(data("held by the link", at: 10)),
            ])
        #expect(!toxic.closesWhenRemoved)
        #expect(TimeoutToxic(timeout: .zero).closesWhenRemoved)
    }
}
