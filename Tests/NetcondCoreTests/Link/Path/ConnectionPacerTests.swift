import Testing

@testable import NetcondCore

/// `connection_bandwidth` under the packet engine: each connection's packets spaced by their time
/// on the wire at its rate, the others untouched; a backlog past the queue dropped.
@Suite struct ConnectionPacerTests {
    /// 1 Mbit/s: a 1,500-byte packet takes 12 ms.
    let rate = Bandwidth.mbit(1)

    @Test func aConnectionsPacketsAreSpacedAtItsRateAndOthersAreNot() {
        var pacer = ConnectionPacer<Int>()
        let limit = QueueLimit.bytes(ByteCount(bytes: 64 * 1024))
        // Three packets of connection 1 delivered together by the shared link.
        #expect(pacer.pace(1, bytes: 1500, deliveredAt: .zero, rate: self.rate, limit: limit) == .ms(12))
        #expect(pacer.pace(1, bytes: 1500, deliveredAt: .zero, rate: self.rate, limit: limit) == .ms(24))
        #expect(pacer.pace(1, bytes: 1500, deliveredAt: .ms(1), rate: self.rate, limit: limit) == .ms(36))
        // Connection 2 has its own rate.
        #expect(pacer.pace(2, bytes: 1500, deliveredAt: .ms(1), rate: self.rate, limit: limit) == .ms(13))
        // After an idle spell the link's moment wins.
        #expect(pacer.pace(1, bytes: 1500, deliveredAt: .ms(500), rate: self.rate, limit: limit) == .ms(500))
    }

    @Test func aBacklogPastTheQueueIsDropped() {
        var pacer = ConnectionPacer<Int>()
        let limit = QueueLimit.packets(2)
        var delivered = 0
        for _ in 0..<10 where pacer.pace(7, bytes: 1500, deliveredAt: .zero, rate: self.rate, limit: limit) != nil {
            delivered += 1
        }
        // Two packets, the one on the wire included (as the shared queue counts them).
        #expect(delivered == 2)
        pacer.forget(idleBefore: .ms(1000))
        #expect(pacer.count == 0)
    }
}
