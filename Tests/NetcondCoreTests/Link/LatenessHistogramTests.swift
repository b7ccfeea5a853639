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
        #expect(histogram.percentile(99) == .microseconds(100))
        #expect(histogram.maximum == .microseconds(95))
    }

    @Test func beyondTheLastBucketIsTheMaximum() {
        var histogram = LatenessHistogram()
        histogram.record(.milliseconds(1))
        histogram.record(.milliseconds(50))
        #expect(histogram.percentile(50) == .microseconds(1010))
        #expect(histogram.percentile(100) == .milliseconds(50))
    }
}
