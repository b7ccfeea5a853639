import CNetcondPacket
import NetcondCore

/// What the engine sends itself, outside the queue's verdicts: answers in a server's place, copies,
/// resets (through its raw sockets).
extension PacketEngine {
    /// Sends the packets netcond answers with in a server's place, when they are due, and the copies.
    func sendInjected(upTo now: Instant) {
        while let bytes = self.driver.dueInjected(upTo: now) { self.copies.append(bytes) }
        for var bytes in self.copies {
            let length = UInt32(bytes.count)
            let result = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
                _ = ncq_fix_checksum(buffer.baseAddress!, length)
                return ncq_send_copy(
                    buffer.first.map { $0 >> 4 == 6 } == true ? self.raw6 : self.raw4, buffer.baseAddress!, length)
            }
            if result != 0 {
                self.driver.summary.copiesNotSent += 1
            } else if let capture = self.capture {
                capture.write(bytes, length: length, delivered: true, atMonotonic: ncq_now())
            }
        }
        self.copies.removeAll(keepingCapacity: true)
    }

    func sendResets(upTo now: Instant) {
        while var reset = self.driver.dueReset(upTo: now) {
            if self.nat64 != nil { reset = self.translated(reset) }
            var copy = [UInt8](repeating: 0, count: 60)
            var copied: UInt32 = 0
            let result = ncq_send_rst(
                reset.version == 6 ? self.raw6 : self.raw4, Int32(reset.version), reset.source, reset.sourcePort,
                reset.destination, reset.destinationPort, reset.seq, reset.ack, reset.answersSYN ? 1 : 0, &copy, &copied
            )
            if result != 0 {
                self.driver.summary.resetsNotSent += 1
            } else if let capture = self.capture {
                // The reset crossed the link (it was timed as if it had): it is in the capture.
                capture.write(Array(copy.prefix(Int(copied))), length: copied, delivered: true, atMonotonic: ncq_now())
            }
        }
    }

    /// Changes one bit of a whole packet past its IP header, after making its transport checksum
    /// right for the original: its receiver's checksum check then discards it, as it would a packet
    /// corrupted on a real path (the kernel counts it in `InCsumErrors`).
    static func corrupt(_ bytes: inout [UInt8], offset: Int) {
        let length = bytes.count
        var start = Int(bytes.withUnsafeMutableBufferPointer { ncq_fix_checksum($0.baseAddress!, UInt32(length)) })
        if start < 0 { start = bytes.first.map { $0 >> 4 == 6 ? 40 : Int($0 & 0x0f) * 4 } ?? 0 }
        guard length > start, start >= 0 else { return }
        let at = start + offset % (length - start)
        bytes[at] ^= UInt8(1) << UInt8(offset % 8)
    }
}
