import CNetcondPacket
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Passing in the kernel (Docs/engines.md): the run's passing set, and the rules that pass the
/// packets whose marks it holds at once, with a copy to the engine's log groups.
extension PacketCage {
    /// The rule that passes a packet whose mark the passing set holds at once, in the kernel, and
    /// marks it as having crossed the link: with a copy to the log group of its direction (0 up,
    /// 1 down), or, with `ring`, with the ring's bit (the cgroup's programs copy it). Empty: no log
    /// group, the cage never passes.
    func passingRule(group offset: UInt16, ring: Bool) -> String {
        guard let group = self.logGroup else { return "" }
        let set = "    meta mark @\(self.chainPrefix)_passing"
        if ring { return set + " meta mark set meta mark | \(Self.hex(Self.passedBit | Self.ringBit))" }
        return set + " log group \(group &+ offset) snaplen \(self.logCopyRange) "
            + "queue-threshold 1 meta mark set meta mark | \(Self.hex(Self.passedBit))"
    }

    /// Whether the cage can pass packets in the kernel: it has log groups, and the kernel has not
    /// refused a start (``passInKernel(_:)``).
    var canPassInKernel: Bool { self.nftSocket >= 0 }

    /// Makes the kernel pass the cage's packets at once, with a copy to the log groups (`true`),
    /// or send them to the queues again (`false`), by putting the run's two marks in its passing
    /// set or taking them out: one nf_tables transaction, in force for every packet after it when
    /// this returns. Returns whether the set now says so (false without log groups, or when the
    /// kernel refused: the queues then go on getting every packet, which is always right, and a
    /// refused start is not tried again).
    @discardableResult
    public func passInKernel(_ on: Bool) -> Bool {
        guard self.nftSocket >= 0, on != self.passingInKernel else { return on == self.passingInKernel }
        let keys = [self.mark, self.mark | Self.downBit]
        let result = ncq_nft_set_elements(
            self.nftSocket, Self.table, self.chainPrefix + "_passing", keys, Int32(keys.count), on ? 1 : 0)
        if result == 0 {
            self.passingInKernel = on
        } else if on {
            // Refused (no nf_tables set, no log support): the queues keep every packet, for good.
            close(self.nftSocket)
            self.nftSocket = -1
        }
        return on == self.passingInKernel
    }
}
