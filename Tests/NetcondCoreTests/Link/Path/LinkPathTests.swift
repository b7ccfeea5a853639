import Testing

@testable import NetcondCore

/// One direction of the link path, in virtual time: each stage's effect on a unit's fate, stalls,
/// and the same seed giving the same fates.
@Suite struct LinkPathTests {
    typealias Path = LinkPath<Int, Int>

    static func delivers(_ at: Instant, corrupt: Int? = nil, copy: Bool = false) -> PathAdmission {
        .delivers(at: at, corruptByte: corrupt, duplicated: copy)
    }

    /// Every unit the path delivers by `until`: (unit, moment, copy?).
    static func drain(_ path: inout Path, until: Instant) -> [(unit: Int, at: Instant, copy: Bool)] {
        var out: [(Int, Instant, Bool)] = []
        while let delivery = path.popDelivery(upTo: until) { out.append((delivery.unit, delivery.at, delivery.isCopy)) }
        return out
    }

    @Test func aUnitLeavesAfterItsSerializationAndArrivesALatencyLater() {
        var path = Path(LinkDirection(latency: .milliseconds(50), bandwidth: .mbit(1)), seed: 1)
        #expect(path.offer(1, bytes: 1500, connection: nil, at: .zero) == Self.delivers(.ms(62)))
        #expect(path.offer(2, bytes: 1500, connection: nil, at: .zero) == Self.delivers(.ms(74)))
        #expect(path.nextDelivery == .ms(62))
        #expect(path.popDelivery(upTo: .ms(61)) == nil)
        #expect(Self.drain(&path, until: .ms(100)).map(\.unit) == [1, 2])
        #expect(path.counters.offered == 2 && path.counters.lost == 0 && path.unitsOnPath == 0)
    }

    @Test func lossAFullQueueAndAnOutageDropAndAreCountedApart() {
        var lossy = Path(LinkDirection(loss: .bernoulli(.one)), seed: 1)
        #expect(lossy.offer(0, bytes: 100, connection: nil, at: .zero) == .dropped(.lost))
        var narrow = Path(LinkDirection(bandwidth: .mbit(1), queuePackets: 1), seed: 1)
        #expect(narrow.offer(0, bytes: 1500, connection: nil, at: .zero) == Self.delivers(.ms(12)))
        #expect(narrow.offer(1, bytes: 1500, connection: nil, at: .zero) == .dropped(.queueFull))
        #expect(lossy.counters.lost == 1 && narrow.counters.queueDrops == 1 && narrow.counters.lost == 0)
        var dark = Path(LinkDirection(latency: .milliseconds(5)), seed: 1)
        dark.blackholed = true
        #expect(dark.offer(0, bytes: 100, connection: nil, at: .zero) == .dropped(.outage))
        dark.blackholed = false
        #expect(dark.offer(1, bytes: 100, connection: nil, at: .ms(1)) == Self.delivers(.ms(6)))
        #expect(dark.counters.outageDrops == 1)
    }

    @Test func eachConnectionIsPacedBehindTheSharedLinkAndItsBacklogIsBounded() {
        // 10 Mbit/s shared (1.2 ms a packet), 1 Mbit/s per connection (12 ms), two packets of backlog.
        var path = Path(LinkDirection(bandwidth: .mbit(10), connectionBandwidth: .mbit(1), queuePackets: 2), seed: 1)
        #expect(path.offer(0, bytes: 1500, connection: 7, at: .zero) == Self.delivers(.ms(12) + .microseconds(1200)))
        #expect(path.offer(1, bytes: 1500, connection: 8, at: .zero) == Self.delivers(.ms(12) + .microseconds(2400)))
        #expect(path.offer(2, bytes: 1500, connection: 7, at: .ms(3)) == Self.delivers(.ms(24) + .microseconds(1200)))
        #expect(path.offer(3, bytes: 1500, connection: 7, at: .ms(4)) == .dropped(.connectionQueueFull))
        // A unit of no connection is not paced (it waits behind the dropped one, which the shared
        // link had carried: the connection's own shaper dropped it), and overtakes the paced ones.
        #expect(path.offer(4, bytes: 1500, connection: nil, at: .ms(5)) == Self.delivers(.ms(6) + .microseconds(600)))
        #expect(Self.drain(&path, until: .s(1)).map(\.unit) == [4, 0, 1, 2])
        #expect(path.counters.queueDrops == 1)
    }

    @Test func jitterAloneNeverReordersButReorderingDoes() {
        var steady = Path(LinkDirection(latency: .milliseconds(20), jitter: .milliseconds(15)), seed: 7)
        for index in 0..<500 { _ = steady.offer(index, bytes: 1200, connection: nil, at: .ms(Int64(index))) }
        let inOrder = Self.drain(&steady, until: .s(10))
        #expect(inOrder.map(\.unit) == Array(0..<500))
        var shuffled = Path(
            LinkDirection(latency: .milliseconds(20), reorder: Probability(0.25), reorderGap: .milliseconds(10)),
            seed: 7)
        for index in 0..<500 { _ = shuffled.offer(index, bytes: 1200, connection: nil, at: .ms(Int64(index))) }
        let sent = Self.drain(&shuffled, until: .s(10))
        #expect(sent.map(\.unit) != Array(0..<500), "some units were overtaken")
        // A held-back unit arrives exactly the gap after the others would have.
        #expect(sent.allSatisfy { $0.at == .ms(Int64($0.unit) + 20) || $0.at == .ms(Int64($0.unit) + 30) })
        let reordered = shuffled.counters.reordered
        #expect(reordered == sent.filter { $0.at == .ms(Int64($0.unit) + 30) }.count)
        #expect((90...160).contains(reordered), "about a quarter of 500: \(reordered)")
    }

    @Test func aCopyArrivesRightBehindItsOriginalAndACorruptedByteIsInsideTheUnit() {
        var doubled = Path(LinkDirection(latency: .milliseconds(5), duplicate: .one), seed: 1)
        #expect(doubled.offer(9, bytes: 100, connection: nil, at: .zero) == Self.delivers(.ms(5), copy: true))
        let both = Self.drain(&doubled, until: .ms(5))
        #expect(
            both.map(\.unit) == [9, 9] && both.map(\.copy) == [false, true] && both.allSatisfy { $0.at == .ms(5) })
        var broken = Path(LinkDirection(corrupt: .one), seed: 1)
        for index in 0..<200 {
            guard case .delivers(_, let byte?, _) = broken.offer(index, bytes: 60, connection: nil, at: .zero) else {
                Issue.record("every unit should carry a corrupted byte")
                return
            }
            #expect((0..<60).contains(byte))
        }
        #expect(broken.counters.corrupted == 200 && doubled.counters.duplicated == 1)
    }

    @Test func theSameSeedGivesTheSameFatesUnitForUnit() {
        let conditions = LinkDirection(
            latency: .milliseconds(40), jitter: .milliseconds(8), bandwidth: .mbit(2),
            loss: .gilbertElliott(
                p: Probability(0.01), r: Probability(0.3), lossInGood: .zero, lossInBad: Probability(0.5)),
            queuePackets: 30, reorder: Probability(0.02), duplicate: Probability(0.01), corrupt: Probability(0.01))
        func run(_ seed: UInt64) -> [PathAdmission] {
            var path = Path(conditions, seed: seed)
            return (0..<2000).map { path.offer($0, bytes: 1000 + $0 % 500, connection: nil, at: .ms(Int64($0 / 3))) }
        }
        #expect(run(42) == run(42))
        #expect(run(42) != run(43))
    }

    @Test func burstyLossLosesItsMeanRate() {
        let spec = LossSpec.gilbertElliott(
            p: Probability(0.02), r: Probability(0.25), lossInGood: .zero, lossInBad: Probability(0.6))
        var path = Path(LinkDirection(loss: spec), seed: 3)
        let total = 100_000
        for i in 0..<total { _ = path.offer(i, bytes: 100, connection: nil, at: .ms(Int64(i))) }
        let rate = Double(path.counters.lost) / Double(total)
        #expect(abs(rate - spec.meanRate) < 0.005, "\(rate) against \(spec.meanRate)")
    }

    // MARK: Stalls

    /// 1 Mbit/s (12 ms a packet), 10 ms latency; a stall from 100 to 400 ms.
    static func stalled() -> Path {
        Path(LinkDirection(latency: .milliseconds(10), bandwidth: .mbit(1), queuePackets: 4), seed: 1)
    }

    @Test func whatHadNotLeftTheQueueLeavesTheStallsLengthLater() {
        var path = Self.stalled()
        // Three packets at 95 ms: the first leaves at 107, the others wait behind it.
        for index in 0..<3 { _ = path.offer(index, bytes: 1500, connection: nil, at: .ms(95)) }
        path.setStalled(true, at: .ms(100))
        #expect(path.nextDelivery == nil, "the first was still on the wire: nothing arrives during the stall")
        #expect(path.stalledSince == .ms(100))
        path.setStalled(false, at: .ms(400))
        #expect(Self.drain(&path, until: .s(1)).map(\.at) == [.ms(417), .ms(429), .ms(441)])
    }

    @Test func whatWasOnItsWayIsHeldAtTheFarEndUntilTheStallEnds() {
        var path = Self.stalled()
        #expect(path.offer(0, bytes: 1500, connection: nil, at: .ms(80)) == Self.delivers(.ms(102)))
        #expect(path.offer(1, bytes: 1500, connection: nil, at: .ms(81)) == Self.delivers(.ms(114)), "behind the first")
        path.setStalled(true, at: .ms(100))
        // The first left the queue at 92 and was propagating: it arrives when the stall ends.
        #expect(path.popDelivery(upTo: .ms(300)) == nil)
        path.setStalled(false, at: .ms(400))
        // The second left the queue at 104, after the stall began: 300 ms later than it would have.
        #expect(Self.drain(&path, until: .s(1)).map(\.at) == [.ms(400), .ms(414)])
    }

    @Test func whatArrivesDuringAStallStartsWhenItEndsAndOverflowsTheQueue() {
        var path = Self.stalled()
        path.setStalled(true, at: .ms(100))
        for index in 0..<4 { #expect(path.offer(index, bytes: 1500, connection: nil, at: .ms(200)) == .held) }
        #expect(
            path.offer(4, bytes: 1500, connection: nil, at: .ms(250)) == .dropped(.queueFull), "four packets fill it")
        path.setStalled(false, at: .ms(400))
        #expect(Self.drain(&path, until: .s(1)).map(\.at) == [.ms(422), .ms(434), .ms(446), .ms(458)])
        #expect(path.counters.queueDrops == 1)
    }

    @Test func aStallOnAnUnlimitedLinkHoldsAQueuesWorthAndLetsItGoAtOnce() {
        var path = Path(LinkDirection(latency: .milliseconds(10), queue: ByteCount(bytes: 3000)), seed: 1)
        path.setStalled(true, at: .ms(100))
        #expect(path.offer(0, bytes: 1500, connection: nil, at: .ms(150)) == .held)
        #expect(path.offer(1, bytes: 1500, connection: nil, at: .ms(150)) == .held)
        #expect(path.offer(2, bytes: 1500, connection: nil, at: .ms(150)) == .dropped(.queueFull))
        path.setStalled(false, at: .ms(300))
        #expect(Self.drain(&path, until: .s(1)).map(\.at) == [.ms(310), .ms(310)])
    }

    @Test func aQueueInPacketsReplacesTheByteLimit() {
        #expect(LinkDirection(queue: ByteCount(bytes: 32 * 1024)).queueLimit == .bytes(ByteCount(bytes: 32 * 1024)))
        #expect(LinkDirection(queue: ByteCount(bytes: 32 * 1024), queuePackets: 50).queueLimit == .packets(50))
    }
}
