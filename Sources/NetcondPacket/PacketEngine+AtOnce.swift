import CNetcondPacket
import NetcondCore

/// Letting a packet go at once, before the link's bookkeeping (Docs/engines.md).
extension PacketEngine {
    /// Lets go at once the packets at the head of a batch that the link is certain to deliver at
    /// once, unchanged (``PacketLinkDriver/passesAtOnce(_:)``: a link that holds nothing back, with
    /// nothing on it): their verdicts go out before the link's bookkeeping, which still follows
    /// for each in order (``admit(_:readAt:offset:letGoAt:)``). The first packet that may be held
    /// ends the run of them, so that none overtakes it. Their verdicts go out now when `flush`
    /// (else with the next flush of the queue's verdicts). Returns how many were let go.
    func letGoAtOnce(_ packets: UnsafeBufferPointer<ncq_packet>, flush: Bool) -> Int {
        guard self.configurationAtOnce.up || self.configurationAtOnce.down, self.driver.nothingIsAheadAtOnceInPlace()
        else { return 0 }
        let (up, down) = self.configurationAtOnce
        var count = 0
        for packet in packets {
            // The kernel passed a logged copy's packet already: it holds up nothing.
            if packet.logged != 0 {
                count += 1
                continue
            }
            guard packet.queue == self.upQueue ? up : down else { break }
            self.queue.verdict(
                queue: packet.queue, id: packet.id, accept: true, mark: packet.mark | PacketCage.passedBit)
            count += 1
        }
        if count > 0 && flush { self.queue.flush() }
        return count
    }

    /// Reads again the configuration part of ``PacketLinkDriver/passesAtOnce(_:)`` (no capture, no
    /// NAT64 either), after anything that may change it: a change of the timelines, a command.
    func reconsiderAtOnce() {
        let possible = self.capture == nil && self.nat64 == nil
        self.configurationAtOnce = (
            possible && self.driver.configurationPassesAtOnce(.up),
            possible && self.driver.configurationPassesAtOnce(.down)
        )
    }
}
