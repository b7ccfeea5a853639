import Testing

@testable import NetcondCore

@Suite struct SenderWindowTests {
    let mss = 1000

    func window(_ algorithm: CongestionControl, bandwidth: Bandwidth? = .mbit(8)) -> SenderWindow {
        SenderWindow(
            algorithm: algorithm, mss: self.mss, receiveWindow: 1 << 22, bandwidth: bandwidth,
            baseRTT: .milliseconds(100))
    }

    @Test func startsAtTenSegmentsAndDoublesPerRoundTrip() {
        var window = self.window(.cubic)
        #expect(window.cwnd == 10_000)
        window.onAck(bytes: 10_000, now: .ms(100), rtt: .milliseconds(100))
        #expect(window.cwnd == 20_000)
    }

    @Test func cubicShrinksByThirtyPercentOnLossAndRestartsOnTimeout() {
        var window = self.window(.cubic)
        window.onAck(bytes: 90_000, now: .ms(300), rtt: .milliseconds(100))
        #expect(window.cwnd == 100_000)
        window.onFastRetransmit()
        #expect(window.cwnd == 70_000)
        // Congestion avoidance now: one round trip of acks grows it by far less than slow start would.
        window.onAck(bytes: 70_000, now: .ms(400), rtt: .milliseconds(100))
        #expect(window.cwnd > 70_000 && window.cwnd < 80_000)
        window.onTimeout(reduceThreshold: true)
        #expect(window.cwnd == 1_000)
    }

    @Test func bbrIgnoresLossAndStopsAtTwiceTheBandwidthDelayProduct() {
        var window = self.window(.bbr)
        window.onFastRetransmit()
        window.onTimeout(reduceThreshold: true)
        #expect(window.cwnd == 10_000)
        for step in 1...20 { window.onAck(bytes: 100_000, now: .ms(Int64(step * 100)), rtt: .milliseconds(100)) }
        // 8 Mbit/s × 100 ms = 100 KB; twice that.
        #expect(window.cwnd == 200_000)
    }

    @Test func receiveWindowBoundsTheAllowance() {
        var window = SenderWindow(
            algorithm: .cubic, mss: 1000, receiveWindow: 50_000, bandwidth: nil, baseRTT: .milliseconds(10))
        for step in 1...10 { window.onAck(bytes: 40_000, now: .ms(Int64(step * 10)), rtt: .milliseconds(10)) }
        #expect(window.allowance == 50_000)
    }
}
