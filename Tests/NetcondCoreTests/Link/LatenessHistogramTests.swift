import Testing

@testable import NetcondCore

@Suite struct LatenessHistogramTests {
    @Test func percentilesAreBucketEdges() {
        var histogram = LatenessHistogram()
        #expect(histogram.percentile(50) == .zero)
        for micros in [5, 15, 15, 25, 95] { histogram.record(.microseconds(Int64(micros))) }
        histogram.record(.microseconds(-3))  // early counts as on time
        #expect(histogram.count == 6)
        #expect(histogram.percentile(50) == .microseconds(20))
        // The 99th is in the 90-100 µs bucket, whose edge is past the maximum: the maximum.
        #expect(histogram.percentile(99) == .microseconds(95))
        #expect(histogram.maximum == .microseconds(95))
    }

    @Test func beyondTheLastBucketIsTheMaximum() {
        var histogram = LatenessHistogram()
        histogram.record(.milliseconds(1))
        histogram.record(.milliseconds(50))
        #expect(histogram.percentile(50) == .microseconds(1010))
        #expect(histogram.percentile(100) == .milliseconds(50))
    }

    @Test func countsThoseAtLeastSoLateBeyondTheRangeToo() {
        var histogram = LatenessHistogram()
        #expect(histogram.count(atLeast: .zero) == 0)
        for micros: Int64 in [0, 999, 1_000, 1_009, 2_500, 40_000] { histogram.record(.microseconds(micros)) }
        #expect(histogram.count(atLeast: .zero) == 6)
        #expect(histogram.count(atLeast: .milliseconds(1)) == 4)
        #expect(histogram.count(atLeast: .microseconds(1_010)) == 2)
        #expect(histogram.count(atLeast: LatenessHistogram.range) == 1)
        #expect(histogram.count(atLeast: .microseconds(-5)) == 6)
    }
}
