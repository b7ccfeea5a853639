import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct ResetPeerToxicTests {
    @Test func theFirstChunkIsTakenAndTheStreamResetItsTimeLater() {
        var toxic = ResetPeerToxic(timeout: .milliseconds(200))
        var random = SeededRandom(seed: 1)
        // Armed by data, not by time.
        #expect(toxic.start(now: t(0)) == [])
        #expect(
            toxic.take(data("taken", at: 3_000), now: t(3_000), random: &random) == [
                .drop(bytes: 5), .pause(until: t(3_200)),
            ])
        #expect(toxic.wake(now: t(3_200), random: &random) == [.cut(.reset)])
    }

    @Test func theEndArmsItTooAndZeroResetsAtOnce() {
        var toxic = ResetPeerToxic(timeout: .zero)
        var random = SeededRandom(seed: 1)
        #expect(toxic.take(.end(.eof), now: t(50), random: &random) == [.drop(bytes: 0), .pause(until: t(50))])
        #expect(toxic.wake(now: t(50), random: &random) == [.cut(.reset)])
    }

    @Test func aResetUnderWayCannotBeCutShort() {
        var toxic = ResetPeerToxic(timeout: .milliseconds(300))
        var random = SeededRandom(seed: 1)
        #expect(toxic.interrupt() == [])
        _ = toxic.take(data("taken", at: 0), now: t(0), random: &random)
        #expect(toxic.interrupt() == nil)
        #expect(toxic.wake(now: t(300), random: &random) == [.cut(.reset)])
        #expect(toxic.interrupt() == [])
    }
}
