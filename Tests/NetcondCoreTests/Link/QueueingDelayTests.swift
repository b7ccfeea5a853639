import Testing

@testable import NetcondCore

/// `LinkModel.queueingDelay`: how long a byte queued now would wait at a direction's bottleneck
/// (the dashboard's graph), in virtual time.
@Suite struct QueueingDelayTests {
    @Test func aFullQueueWaitsItsBytesAtTheRateAndAnIdleOneNothing() {
        let down = LinkDirection(latency: .milliseconds(20), bandwidth: .mbit(1), queue: ByteCount(bytes: 64 * 1024))
        var link = LinkSimulation(Profile(name: "t", down: down))
        let flow = link.model.openFlow(at: .zero)
        #expect(link.connect(flow, at: .zero) != nil)
        #expect(link.model.queueingDelay(.down) == .zero)
        let start = link.model.now
        // A sender with far more than the window to send: the queue fills as slow start grows.
        for step in 0..<40 {
            let at = start + .milliseconds(Int64(step) * 50)
            link.model.send(flow, .down, bytes: 64 * 1024, at: at)
            link.run(until: at)
        }
        let delay = link.model.queueingDelay(.down)
        // Never more than a full queue and the segment being sent, at 1 Mbit/s: (64 KB + 1,500) × 8 / 1e6.
        let most = Span(nanoseconds: Int64(Double(64 * 1024 + 1_500) * 8e9 / 1e6))
        #expect(delay > .milliseconds(100) && delay <= most, "\(delay)")
        #expect(link.model.queueingDelay(.up) == .zero)  // no rate up: nothing queues
        link.model.closeFlow(flow)
        link.run(until: link.model.now + .seconds(30))
        #expect(link.model.queueingDelay(.down) == .zero)
    }
}
