import Testing

@testable import NetcondCore

/// One direction of the packet link, in virtual time: each stage's effect on a packet's fate, and
/// the same seed giving the same fates.
@Suite struct PacketLinkTests {
    func arrivals(_ fates: [PacketFate]) -> [Instant] {
        fates.compactMap { if case .deliver(let at, _) = $0 { at } else { nil } }
    }

    @Test func aPacketLeavesAfterItsSerializationAndArrivesALatencyLater() {
        var link = PacketLink(PacketImpairments(latency: .milliseconds(50), rate: .mbit(1)), seed: 1)
        #expect(link.offer(bytes: 1500, at: .zero) == [.deliver(at: .ms(62), corruptByte: nil)])
        #expect(link.offer(bytes: 1500, at: .zero) == [.deliver(at: .ms(74), corruptByte: nil)])
        #expect(link.counters.offered == 2 && link.counters.lost == 0)
    }

    @Test func lossAndAFullQueueDropAndAreCountedApart() {
        var lossy = PacketLink(PacketImpairments(loss: .bernoulli(.one)), seed: 1)
        #expect(lossy.offer(bytes: 100, at: .zero) == [.dropped(.lost)])
        var narrow = PacketLink(PacketImpairments(rate: .mbit(1), queue: .packets(1)), seed: 1)
        #expect(self.arrivals(narrow.offer(bytes: 1500, at: .zero)) == [.ms(12)])
        #expect(narrow.offer(bytes: 1500, at: .zero) == [.dropped(.queueFull)])
        #expect(lossy.counters.lost == 1 && narrow.counters.queueDrops == 1 && narrow.counters.lost == 0)
    }

    @Test func jitterAloneNeverReordersButReorderingDoes() {
        var steady = PacketLink(PacketImpairments(latency: .milliseconds(20), jitter: .milliseconds(15)), seed: 7)
        let inOrder = (0..<500).flatMap { self.arrivals(steady.offer(bytes: 1200, at: .ms(Int64($0)))) }
        #expect(inOrder == inOrder.sorted())
        var shuffled = PacketLink(
            PacketImpairments(latency: .milliseconds(20), reorder: Probability(0.25), reorderGap: .milliseconds(10)), seed: 7)
        var sent: [(index: Int, at: Instant)] = []
        for index in 0..<500 {
            for at in self.arrivals(shuffled.offer(bytes: 1200, at: .ms(Int64(index)))) { sent.append((index, at)) }
        }
        let order = sent.sorted { ($0.at, $0.index) < ($1.at, $1.index) }.map(\.index)
        #expect(order != Array(0..<500), "some packets were overtaken")
        // A held-back packet arrives exactly the gap after the others would have.
        #expect(sent.allSatisfy { $0.at == .ms(Int64($0.index) + 20) || $0.at == .ms(Int64($0.index) + 30) })
        let reordered = shuffled.counters.reordered
        #expect(reordered == sent.filter { $0.at == .ms(Int64($0.index) + 30) }.count)
        #expect((90...160).contains(reordered), "about a quarter of 500: \(reordered)")
    }

    @Test func duplicatesArriveTogetherAndACorruptedByteIsInsideThePacket() {
        var doubled = PacketLink(PacketImpairments(latency: .milliseconds(5), duplicate: .one), seed: 1)
        #expect(doubled.offer(bytes: 100, at: .zero) == [.deliver(at: .ms(5), corruptByte: nil), .deliver(at: .ms(5), corruptByte: nil)])
        var broken = PacketLink(PacketImpairments(corrupt: .one), seed: 1)
        for _ in 0..<200 {
            guard case .deliver(_, let byte?) = broken.offer(bytes: 60, at: .zero).first else {
                Issue.record("every packet should carry a corrupted byte")
                return
            }
            #expect((0..<60).contains(byte))
        }
        #expect(broken.counters.corrupted == 200 && doubled.counters.duplicated == 1)
    }

    @Test func theSameSeedGivesTheSameFatesPacketForPacket() {
        let impairments = PacketImpairments(
            latency: .milliseconds(40), jitter: .milliseconds(8), rate: .mbit(2), queue: .packets(30),
            loss: .gilbertElliott(p: Probability(0.01), r: Probability(0.3), lossInGood: .zero, lossInBad: Probability(0.5)),
            reorder: Probability(0.02), duplicate: Probability(0.01), corrupt: Probability(0.01))
        func run(_ seed: UInt64) -> [[PacketFate]] {
            var link = PacketLink(impairments, seed: seed)
            return (0..<2000).map { link.offer(bytes: 1000 + $0 % 500, at: .ms(Int64($0 / 3))) }
        }
        #expect(run(42) == run(42))
        #expect(run(42) != run(43))
    }

    @Test func burstyLossLosesItsMeanRate() {
        let spec = LossSpec.gilbertElliott(p: Probability(0.02), r: Probability(0.25), lossInGood: .zero, lossInBad: Probability(0.6))
        var link = PacketLink(PacketImpairments(loss: spec), seed: 3)
        let total = 100_000
        for i in 0..<total { _ = link.offer(bytes: 100, at: .ms(Int64(i))) }
        let rate = Double(link.counters.lost) / Double(total)
        #expect(abs(rate - spec.meanRate) < 0.005, "\(rate) against \(spec.meanRate)")
    }

    @Test func aProfileDirectionMeansTheSameLink() {
        let direction = LinkDirection(
            latency: .milliseconds(300), jitter: .milliseconds(20), bandwidth: .kbit(240),
            queue: ByteCount(bytes: 32 * 1024), loss: .bernoulli(Probability(0.01)))
        let impairments = PacketImpairments(direction)
        #expect(impairments.latency == .milliseconds(300) && impairments.jitter == .milliseconds(20))
        #expect(impairments.rate == .kbit(240) && impairments.queue == .bytes(ByteCount(bytes: 32 * 1024)))
        #expect(impairments.loss == .bernoulli(Probability(0.01)) && impairments.reorder == .zero)
    }
}
