import Testing

@testable import NetcondCore

@Suite struct DelayLineTests {
    @Test func latencyAloneIsExact() {
        var line = DelayLine(latency: .milliseconds(400), jitter: .zero, seed: 1)
        #expect(line.arrival(departingAt: .ms(10)) == .ms(410))
        #expect(line.arrival(departingAt: .ms(11)) == .ms(411))
    }

    @Test func jitterStaysInItsWindowAndNeverReorders() {
        var line = DelayLine(latency: .milliseconds(50), jitter: .milliseconds(20), seed: 4)
        var previous = Instant.zero
        var spread = Set<Int64>()
        for i in 0..<1000 {
            let departure = Instant.ms(Int64(i))
            let arrival = line.arrival(departingAt: departure)
            #expect(arrival >= previous)
            #expect(arrival >= departure + .milliseconds(50))
            // At most the jitter, or held behind an earlier segment that drew more.
            #expect(arrival <= max(departure + .milliseconds(70), previous))
            spread.insert((arrival - departure).nanoseconds / 1_000_000)
            previous = arrival
        }
        #expect(spread.count > 10)
    }
}
