import Testing

@testable import NetcondCore

/// The emulated sender's socket buffer (`LinkModel.sendBuffer`), and why it matters to a driver
/// whose event loop is sometimes held up.
@Suite struct SendBufferTests {
    @Test func followsTwiceTheWindowWithinLinuxBounds() {
        #expect(LinkModel.sendBuffer(congestionWindow: 14_600) == 64 * 1024)
        #expect(LinkModel.sendBuffer(congestionWindow: 200_000) == 400_000)
        #expect(LinkModel.sendBuffer(congestionWindow: 10_000_000) == 4 * 1024 * 1024)

        var sim = LinkSimulation(.test(latency: .milliseconds(10), bandwidth: .mbit(50)))
        let flow = sim.model.openFlow(at: .zero)
        #expect(sim.model.sendBuffer(flow, .down) == 64 * 1024)
        _ = sim.bulk(flow, .down, total: 5_000_000, from: .zero, deadline: .s(5))
        let window = sim.model.congestionWindow(flow, .down)
        #expect(window > 64 * 1024)
        #expect(sim.model.sendBuffer(flow, .down) == 2 * window)
    }

    @Test func aFullBufferHoldsTheApplicationBack() {
        var sim = LinkSimulation(.test(latency: .milliseconds(10), bandwidth: .kbit(8)))
        let flow = sim.model.openFlow(at: .zero)
        #expect(sim.model.senderHasRoom(flow, .up))
        sim.model.send(flow, .up, bytes: 64 * 1024 + 14_600, at: .zero)
        #expect(!sim.model.senderHasRoom(flow, .up))
        sim.run(until: .s(100))
        #expect(sim.model.senderHasRoom(flow, .up))
    }

    /// Goodput (bytes/s, from 1 s to 11 s) of a 50 Mbit/s, 10 ms download whose driver tops the
    /// sender's buffer up whenever it runs, but every 500 ms is held up for `hold` (nothing read,
    /// nothing delivered, as when the proxy's process is descheduled).
    func goodput(hold: Span, buffer: (LinkModel, FlowID) -> Int) -> Double {
        var sim = LinkSimulation(.test(latency: .milliseconds(10), bandwidth: .mbit(50)))
        let flow = sim.model.openFlow(at: .zero)
        var now = Instant.zero
        let end = Instant.s(11)
        while now < end {
            let intoPeriod = now.nanoseconds % 500_000_000
            if hold > .zero && intoPeriod < hold.nanoseconds {
                now = now + Span(nanoseconds: hold.nanoseconds - intoPeriod)
            }
            sim.deliveries += sim.model.advance(to: now)
            while sim.model.unsent(flow, .down) < buffer(sim.model, flow) {
                sim.model.send(flow, .down, bytes: 64 * 1024, at: now)
            }
            guard let next = sim.model.nextEventTime else { break }
            now = min(next, end)
        }
        sim.deliveries += sim.model.advance(to: end)
        return Double(sim.delivered(flow, .down, by: end) - sim.delivered(flow, .down, by: .s(1))) / 10
    }

    @Test func aLateDriverLosesNoGoodput() {
        let autoTuned: (LinkModel, FlowID) -> Int = { $0.sendBuffer($1, .down) }
        let unheld = self.goodput(hold: .zero, buffer: autoTuned)
        #expect(unheld > 0.97 * 50e6 / 8 * 1460 / 1500)
        // Held up for 40 ms twice a second (8 % of the time), the sender still had a window's
        // worth of bytes to send, so the link never idled and no burst overflowed the queue.
        let held = self.goodput(hold: .milliseconds(40), buffer: autoTuned)
        #expect(held > 0.99 * unheld, "goodput \(held / unheld) of the unheld run")
        // With a fixed 64 KB buffer (10 ms of this link), the same holds cost a large share.
        let fixed = self.goodput(hold: .milliseconds(40)) { _, _ in 64 * 1024 }
        #expect(fixed < 0.9 * unheld, "fixed 64 KB buffer: \(fixed / unheld) of the unheld run")
    }
}
