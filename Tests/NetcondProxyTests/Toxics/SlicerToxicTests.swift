import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct SlicerToxicTests {
    @Test func aChunkIsHalvedUntilEachPieceIsShortEnough() {
        var random = SeededRandom(seed: 1)
        #expect(SlicerToxic.sizes(length: 40, average: 10, variation: 0, random: &random) == [10, 10, 10, 10])
        #expect(SlicerToxic.sizes(length: 30, average: 10, variation: 0, random: &random) == [7, 8, 7, 8])
        #expect(SlicerToxic.sizes(length: 10, average: 10, variation: 0, random: &random) == [10])
        #expect(SlicerToxic.sizes(length: 1, average: 1, variation: 0, random: &random) == [1])
    }

    @Test func theVariationMovesTheMiddleAndStaysWithinItsBound() {
        var random = SeededRandom(seed: 7)
        var again = SeededRandom(seed: 7)
        let sizes = SlicerToxic.sizes(length: 500, average: 10, variation: 4, random: &random)
        #expect(SlicerToxic.sizes(length: 500, average: 10, variation: 4, random: &again) == sizes)
        #expect(sizes.reduce(0, +) == 500)
        #expect(sizes.allSatisfy { (1...14).contains($0) } && Set(sizes).count > 3, "\(sizes)")
    }

    @Test func piecesGoOnTheirDelayApartWithAPauseAfterTheLast() {
        var toxic = SlicerToxic(averageSize: 10, sizeVariation: 0, delay: .milliseconds(1))
        var random = SeededRandom(seed: 1)
        let text = "0123456789abcdefghijABCDEFGHIJ!@#$%^&*()"
        #expect(
            toxic.take(data(text, at: 0), now: t(0), random: &random) == [
                .pass(data("0123456789", at: 0)), .hold(until: t(1)),
            ])
        #expect(
            toxic.wake(now: t(1), random: &random) == [.pass(data("abcdefghij", at: 0)), .hold(until: t(2))])
        #expect(
            toxic.wake(now: t(2), random: &random) == [.pass(data("ABCDEFGHIJ", at: 0)), .hold(until: t(3))])
        #expect(
            toxic.wake(now: t(3), random: &random) == [.pass(data("!@#$%^&*()", at: 0)), .pause(until: t(4))])
        #expect(toxic.wake(now: t(4), random: &random) == [])
    }

    @Test func withNoDelayEveryPieceGoesAtOnce() {
        var toxic = SlicerToxic(averageSize: 10, sizeVariation: 0, delay: .zero)
        var random = SeededRandom(seed: 1)
        let text = "abcdefghijklmnopqrstuvwxyz0123"
        #expect(
            toxic.take(data(text, at: 5), now: t(5), random: &random) == [
                .pass(data("abcdefg", at: 5)), .pass(data("hijklmno", at: 5)), .pass(data("pqrstuv", at: 5)),
                .pass(data("wxyz0123", at: 5)),
            ])
        #expect(toxic.take(.end(.eof), now: t(5), random: &random) == [.pass(.end(.eof))])
    }

    @Test func anInterruptHandsOnTheRest() {
        var toxic = SlicerToxic(averageSize: 10, sizeVariation: 0, delay: .milliseconds(1))
        var random = SeededRandom(seed: 1)
        _ = toxic.take(data(bytes(40), at: 0), now: t(0), random: &random)
        #expect(toxic.interrupt() == [data(bytes(30), at: 0)])
        #expect(toxic.interrupt() == [])
    }
}
