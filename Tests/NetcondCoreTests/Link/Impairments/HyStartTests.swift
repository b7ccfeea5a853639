import Testing

@testable import NetcondCore

/// HyStart's delay test: slow start ends once a round's first eight round trips exceed the path's
/// least by an eighth of it (4 ms at least, 16 ms at most), and not before the window is 16 segments.
@Suite struct HyStartTests {
    /// One round of `count` acknowledgements, sequence numbers from `first`, each with `rtt`.
    static func round(
        _ hystart: inout HyStart, first: UInt64, count: Int, rtt: Span, segments: Double = 32
    ) -> [Bool] {
        (0..<count).map { index in
            hystart.shouldExit(
                seq: first + UInt64(index), nextSeq: first + UInt64(count), sample: rtt, segments: segments)
        }
    }

    @Test func aGrowingRoundTripEndsSlowStartAfterARoundsEightSamples() {
        var hystart = HyStart()
        #expect(!Self.round(&hystart, first: 0, count: 20, rtt: .milliseconds(40)).contains(true))
        #expect(hystart.minimum == .milliseconds(40))
        // 40 ms: the threshold is 5 ms. 44 ms is within it; 46 ms is past it, from the ninth sample.
        #expect(!Self.round(&hystart, first: 20, count: 20, rtt: .milliseconds(44)).contains(true))
        let exits = Self.round(&hystart, first: 40, count: 20, rtt: .milliseconds(46))
        #expect(exits.firstIndex(of: true) == 8)
    }

    @Test func theThresholdIsAnEighthOfTheLeastRoundTripBetweenFourAndSixteenMilliseconds() {
        var short = HyStart()
        _ = Self.round(&short, first: 0, count: 10, rtt: .milliseconds(8))
        #expect(!Self.round(&short, first: 10, count: 10, rtt: .milliseconds(12)).contains(true), "4 ms at least")
        #expect(Self.round(&short, first: 20, count: 10, rtt: .milliseconds(12) + .microseconds(1)).contains(true))
        var long = HyStart()
        _ = Self.round(&long, first: 0, count: 10, rtt: .milliseconds(600))
        #expect(!Self.round(&long, first: 10, count: 10, rtt: .milliseconds(616)).contains(true), "16 ms at most")
        #expect(Self.round(&long, first: 20, count: 10, rtt: .milliseconds(617)).contains(true))
    }

    @Test func aSmallWindowOrAnUnsampledAcknowledgementNeverEndsIt() {
        var hystart = HyStart()
        _ = Self.round(&hystart, first: 0, count: 10, rtt: .milliseconds(40))
        #expect(!Self.round(&hystart, first: 10, count: 10, rtt: .milliseconds(100), segments: 15).contains(true))
        let unsampled = hystart.shouldExit(seq: 20, nextSeq: 30, sample: nil, segments: 64)
        #expect(!unsampled)
    }
}
