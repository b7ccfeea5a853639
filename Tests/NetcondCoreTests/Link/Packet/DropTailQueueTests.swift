import Testing

@testable import NetcondCore

/// The packet link's bottleneck: a FIFO at the link rate, full at a byte or packet limit.
@Suite struct DropTailQueueTests {
    /// 1 Mbit/s: a 1,500-byte packet takes 12 ms on the wire.
    let rate = Bandwidth.mbit(1)

    @Test func packetsLeaveOneAfterAnotherAtTheLinkRate() {
        var queue = DropTailQueue(rate: self.rate, limit: .bytes(ByteCount(bytes: 64 * 1024)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .ms(12))
        #expect(queue.admit(bytes: 1500, at: .zero) == .ms(24))
        #expect(queue.admit(bytes: 1500, at: .ms(5)) == .ms(36))
        // An idle link sends at once.
        #expect(queue.admit(bytes: 1500, at: .ms(100)) == .ms(112))
    }

    @Test func aFullByteQueueDropsAtItsTailUntilAPacketHasLeft() {
        var queue = DropTailQueue(rate: self.rate, limit: .bytes(ByteCount(bytes: 3000)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .ms(12))
        #expect(queue.admit(bytes: 1500, at: .zero) == .ms(24))
        #expect(queue.admit(bytes: 1500, at: .zero) == nil)
        #expect(queue.admit(bytes: 100, at: .ms(11)) == nil, "the first is still on the wire")
        #expect(queue.occupancy(at: .ms(12)) == (bytes: 1500, packets: 1))
        #expect(queue.admit(bytes: 1500, at: .ms(12)) == .ms(36))
    }

    @Test func aPacketLimitCountsPacketsWhateverTheirSize() {
        var queue = DropTailQueue(rate: self.rate, limit: .packets(2))
        #expect(queue.admit(bytes: 40, at: .zero) != nil)
        #expect(queue.admit(bytes: 40, at: .zero) != nil)
        #expect(queue.admit(bytes: 40, at: .zero) == nil)
    }

    @Test func aPacketLargerThanTheByteLimitStillPassesAnEmptyQueue() {
        var queue = DropTailQueue(rate: self.rate, limit: .bytes(ByteCount(bytes: 1000)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .ms(12))
        #expect(queue.admit(bytes: 1500, at: .ms(1)) == nil)
    }

    @Test func withoutARateNothingWaitsAndNothingIsDropped() {
        var queue = DropTailQueue(rate: nil, limit: .packets(1))
        for i in 0..<100 { #expect(queue.admit(bytes: 1500, at: .ms(Int64(i / 10))) == .ms(Int64(i / 10))) }
    }
}
