import NetcondCore
import Testing

@testable import NetcondPacket

/// A packet's delay counts from when the kernel stamped it, not from when netcond read it; a stamp
/// that cannot be trusted falls back to the read, and the link stays first in, first out.
@Suite struct PacketArrivalsTests {
    /// Engine time = wall time + offset: a wall clock at 1,000 s when the engine is at 0.
    static let offset: Int64 = -1_000_000_000_000

    static func ms(_ value: Int64) -> Instant { Instant(nanoseconds: value * 1_000_000) }
    /// The kernel's stamp of a packet that arrived at engine time `engine` (nanoseconds).
    static func stamp(_ engine: Int64) -> Int64 { engine - Self.offset }

    @Test func aStampedPacketArrivesWhenTheKernelStampedIt() {
        var arrivals = PacketArrivals(offset: Self.offset)
        let offset = arrivals.read(offset: Self.offset + 2_000)  // a slew of 2 µs: trusted
        #expect(offset != nil)
        let at = arrivals.arrival(direction: 0, stamp: Self.stamp(9_600_000), readAt: Self.ms(10), offset: offset)
        #expect(at == Instant(nanoseconds: 9_600_000 + 2_000))
    }

    @Test func withoutAStampAPacketArrivesWhenItWasRead() {
        var arrivals = PacketArrivals(offset: Self.offset)
        let offset = arrivals.read(offset: Self.offset)
        #expect(arrivals.arrival(direction: 1, stamp: 0, readAt: Self.ms(10), offset: offset) == Self.ms(10))
    }

    @Test func aStampAfterTheReadIsNotBelieved() {
        var arrivals = PacketArrivals(offset: Self.offset)
        let offset = arrivals.read(offset: Self.offset)
        #expect(
            arrivals.arrival(direction: 0, stamp: Self.stamp(11_000_000), readAt: Self.ms(10), offset: offset)
                == Self.ms(10))
    }

    @Test func afterAStepOfTheWallClockTheReadsStampsAreNotUsed() {
        var arrivals = PacketArrivals(offset: Self.offset)
        // The wall clock jumped 5 s forward: the offset moved by 5 s.
        let stepped = arrivals.read(offset: Self.offset - 5_000_000_000)
        #expect(stepped == nil)
        #expect(
            arrivals.arrival(direction: 0, stamp: Self.stamp(9_000_000), readAt: Self.ms(10), offset: stepped)
                == Self.ms(10))
        // The next read, on the new offset, trusts its stamps again.
        let next = arrivals.read(offset: Self.offset - 5_000_000_000)
        #expect(next != nil)
        let at = arrivals.arrival(
            direction: 0, stamp: 15_000_000 - (Self.offset - 5_000_000_000), readAt: Self.ms(16), offset: next)
        #expect(at == Self.ms(15))
    }

    @Test func aPacketNeverArrivesBeforeTheOneBeforeItInItsDirection() {
        var arrivals = PacketArrivals(offset: Self.offset)
        let offset = arrivals.read(offset: Self.offset)
        // Read unstamped (queued on output) at 10 ms, then a stamped one (on input) from 9 ms.
        #expect(arrivals.arrival(direction: 0, stamp: 0, readAt: Self.ms(10), offset: offset) == Self.ms(10))
        #expect(
            arrivals.arrival(direction: 0, stamp: Self.stamp(9_000_000), readAt: Self.ms(10), offset: offset)
                == Self.ms(10))
        // The other direction has its own order.
        #expect(
            arrivals.arrival(direction: 1, stamp: Self.stamp(9_000_000), readAt: Self.ms(10), offset: offset)
                == Self.ms(9))
    }
}
