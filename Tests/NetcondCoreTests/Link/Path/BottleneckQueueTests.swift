import Testing

@testable import NetcondCore

/// The link path's bottleneck: a FIFO at the link rate, full at a byte or packet limit.
@Suite struct BottleneckQueueTests {
    /// 1 Mbit/s: a 1,500-byte packet takes 12 ms on the wire.
    let rate = Bandwidth.mbit(1)

    @Test func packetsLeaveOneAfterAnotherAtTheLinkRate() {
        var queue = BottleneckQueue(rate: self.rate, limit: .bytes(ByteCount(bytes: 64 * 1024)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .departs(.ms(12)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .departs(.ms(24)))
        #expect(queue.admit(bytes: 1500, at: .ms(5)) == .departs(.ms(36)))
        // An idle link sends at once.
        #expect(queue.admit(bytes: 1500, at: .ms(100)) == .departs(.ms(112)))
    }

    @Test func aFullByteQueueDropsAtItsTailUntilAPacketHasLeft() {
        var queue = BottleneckQueue(rate: self.rate, limit: .bytes(ByteCount(bytes: 3000)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .departs(.ms(12)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .departs(.ms(24)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .full)
        #expect(queue.admit(bytes: 100, at: .ms(11)) == .full, "the first is still on the wire")
        #expect(queue.occupancy(at: .ms(12)) == (bytes: 1500, packets: 1))
        #expect(queue.admit(bytes: 1500, at: .ms(12)) == .departs(.ms(36)))
    }

    @Test func aPacketLimitCountsPacketsWhateverTheirSize() {
        var queue = BottleneckQueue(rate: self.rate, limit: .packets(2))
        #expect(queue.admit(bytes: 40, at: .zero) != .full)
        #expect(queue.admit(bytes: 40, at: .zero) != .full)
        #expect(queue.admit(bytes: 40, at: .zero) == .full)
    }

    @Test func aPacketLargerThanTheByteLimitStillPassesAnEmptyQueue() {
        var queue = BottleneckQueue(rate: self.rate, limit: .bytes(ByteCount(bytes: 1000)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .departs(.ms(12)))
        #expect(queue.admit(bytes: 1500, at: .ms(1)) == .full)
    }

    @Test func withoutARateNothingWaitsAndNothingIsDropped() {
        var queue = BottleneckQueue(rate: nil, limit: .packets(1))
        for i in 0..<100 { #expect(queue.admit(bytes: 1500, at: .ms(Int64(i / 10))) == .departs(.ms(Int64(i / 10)))) }
    }

    // MARK: Stalls

    @Test func aStallStopsTheServerAndWhatWaitedLeavesItsLengthLater() {
        var queue = BottleneckQueue(rate: self.rate, limit: .packets(3))
        #expect(queue.admit(bytes: 1500, at: .zero) == .departs(.ms(12)))
        #expect(queue.admit(bytes: 1500, at: .zero) == .departs(.ms(24)))
        queue.pause(at: .ms(6))
        // Still counted: what was waiting when the stall began, and what comes meanwhile.
        #expect(queue.admit(bytes: 1500, at: .ms(50)) == .held)
        #expect(queue.admit(bytes: 1500, at: .ms(60)) == .full)
        #expect(queue.occupancy(at: .ms(90)) == (bytes: 4500, packets: 3))
        #expect(queue.resume(at: .ms(106))! == (since: .ms(6), length: .milliseconds(100)))
        #expect(queue.occupancy(at: .ms(106)) == (bytes: 3000, packets: 2))
        // The held one starts behind the two that waited (now leaving at 112 and 124).
        #expect(queue.admitHeld(bytes: 1500, arrivedAt: .ms(50), at: .ms(106)) == .departs(.ms(136)))
        #expect(queue.resume(at: .ms(200)) == nil, "not stalled")
    }

    // MARK: CoDel

    /// Offers 1,500-byte packets every `gap` to a 1 Mbit/s link (12 ms each) with a deep queue
    /// under CoDel for `seconds`; returns each delivered packet's wait, and how many CoDel dropped.
    static func overload(gap: Span, seconds: Int64, discipline: QueueDiscipline) -> (
        waits: [Span], drops: Int, full: Int
    ) {
        var queue = BottleneckQueue(rate: .mbit(1), limit: .packets(1000), discipline: discipline)
        var waits: [Span] = []
        var drops = 0
        var full = 0
        var now = Instant.zero
        while now < .ms(seconds * 1000) {
            switch queue.admit(bytes: 1500, at: now) {
            case .departs(let departure): waits.append(departure - now - .milliseconds(12))
            case .aqm: drops += 1
            case .full: full += 1
            case .held: Issue.record("the queue never stalls here")
            }
            now = now + gap
        }
        return (waits, drops, full)
    }

    @Test func codelHoldsAStandingQueueNearItsTargetWhereDropTailLetsItGrow() {
        // Offered 1.2 Mbit/s (a packet every 10 ms) to 1 Mbit/s for 20 s.
        let tail = Self.overload(gap: .milliseconds(10), seconds: 20, discipline: .dropTail)
        #expect(tail.drops == 0 && tail.full == 0)
        #expect(tail.waits.last! > .seconds(Int64(3)), "drop-tail: the queue grows by 2 ms a packet, to seconds")
        let codel = Self.overload(
            gap: .milliseconds(10), seconds: 20,
            discipline: .codel(target: .milliseconds(5), interval: .milliseconds(100)))
        #expect(codel.full == 0 && codel.drops > 100)
        // After the first intervals the wait stays within a few packet times of the target.
        let late = codel.waits.suffix(codel.waits.count / 2)
        #expect(late.max()! < .milliseconds(100), "late waits: \(late.max()!)")
        let mean = late.reduce(Span.zero, +).nanoseconds / Int64(late.count)
        #expect(mean < Span.milliseconds(40).nanoseconds)
    }

    @Test func codelDropsNothingWhileTheLinkKeepsUp() {
        // Offered 0.8 Mbit/s: nothing waits more than a packet, CoDel never acts.
        let light = Self.overload(
            gap: .milliseconds(15), seconds: 10,
            discipline: .codel(target: .milliseconds(5), interval: .milliseconds(100)))
        #expect(light.drops == 0 && light.full == 0)
    }

    @Test func codelWaitsAWholeIntervalAboveTargetBeforeItsFirstDrop() {
        func drop(_ state: inout CoDelState, _ at: Int64, _ sojourn: Int64, _ bytesAhead: Int) -> Bool {
            state.shouldDrop(at: .ms(at), sojourn: .milliseconds(sojourn), bytesAhead: bytesAhead)
        }
        var state = CoDelState(target: .milliseconds(5), interval: .milliseconds(100))
        #expect(!drop(&state, 0, 10, 3000))
        #expect(!drop(&state, 99, 10, 3000))
        #expect(drop(&state, 100, 10, 3000))
        #expect(state.dropping)
        // The next drop comes an interval later (count 1), then interval/√2 after that (count 2).
        #expect(!drop(&state, 199, 10, 3000))
        #expect(drop(&state, 200, 10, 3000))
        #expect(!drop(&state, 270, 10, 3000))
        #expect(drop(&state, 271, 10, 3000))
        // Below target: dropping stops at once.
        #expect(!drop(&state, 300, 2, 3000))
        #expect(!state.dropping)
        // One packet queued ahead is never a standing queue, however long it waited.
        var slow = CoDelState(target: .milliseconds(5), interval: .milliseconds(100))
        for t in stride(from: Int64(0), through: 500, by: 50) {
            #expect(!drop(&slow, t, 50, 1500))
        }
    }
}
