import CNetcondPacket
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// Reading the queues: every packet waiting, each admitted to the link at its arrival.
extension PacketEngine {
    /// Reads every packet waiting (bounded, so that due verdicts are not held up by a flood);
    /// whether there was any.
    func readAll() -> Bool {
        // The ring's copies first: the kernel passed them before anything the queues got since.
        var any = self.readRing()
        // After a read that found the queue empty, a packet's verdict goes out as soon as it can
        // (its answer is what the other end waits for); under a flood (the last call read its
        // most and left packets waiting), the verdicts of all the reads go out together: a send
        // per read woke the receiver per read, and halved the per-packet throughput.
        let early = !self.flooded
        self.flooded = true
        for read in 0..<64 {
            let count = self.queue.receive { packets in
                // The moment of the read, taken once it returned (a packet may have come during it).
                let readAt = self.now
                let letGo = self.letGoAtOnce(packets, flush: early && read == 0)
                // The clocks' difference (for the kernel's stamps) does not change in a few µs.
                let offset = self.arrivals.read(offset: self.wallToEngine)
                for index in packets.indices {
                    self.admit(packets[index], readAt: readAt, offset: offset, letGoAt: index < letGo ? readAt : nil)
                }
            }
            if count == -Int(ENOBUFS) {
                // Copies of passed packets the socket had no room for are counted by their numbers.
                if !self.cage.passingInKernel { self.driver.summary.kernelDrops += 1 }
                continue
            }
            if count <= 0 {
                self.flooded = false
                return any
            }
            any = true
            guard early && read == 0 else { continue }
            // What is due already (a link that holds nothing back) goes out before the next read,
            // which most often only says that nothing more is waiting: its time is not the packet's.
            let now = self.now
            self.follow(to: now)
            self.release(upTo: now)
            self.queue.flush()
        }
        return any
    }

    /// A packet read at `readAt` (with the read's clock `offset`) reaches the link; `letGoAt`: when
    /// its verdict went out, if it was let go at once (the link then only counts it). A copy of a
    /// packet the kernel passed was let go as it arrived.
    func admit(_ packet: ncq_packet, readAt: Instant, offset: Int64?, letGoAt: Instant? = nil) {
        let up = packet.queue == self.upQueue
        let now = self.arrivals.arrival(direction: up ? 0 : 1, stamp: packet.stamp, readAt: readAt, offset: offset)
        var letGoAt = letGoAt
        if packet.logged != 0 {
            // A change due before it came applies first: the link holds it if the kernel passed it too late.
            self.follow(to: now)
            self.countPassed(packet)
            letGoAt = now
        }
        if self.nat64 != nil, let translated = self.translating(packet, up: up) {
            self.admitTranslated(packet, translated, up: up, at: now)
            return
        }
        let copied = Int(packet.payload_length)
        let tcp = packet.payload.flatMap { TCPHeader($0, copied: copied, length: Int(packet.length)) }
        let bytes =
            self.capture == nil ? nil : packet.payload.map { Array(UnsafeBufferPointer(start: $0, count: copied)) }
        var held = HeldPacket(packet, tcp: tcp)
        held.letGoAt = letGoAt
        let taken = self.driver.admit(
            held, up: up, wireLength: Int(packet.wire_length), segments: Int(packet.segments),
            payload: packet.payload, copied: copied, bytes: bytes, at: now)
        if !taken && letGoAt != nil {
            self.driver.summary.letGoTooSoon += 1
        } else if !taken {
            self.queue.verdict(queue: packet.queue, id: packet.id, accept: false, mark: 0)
            if let capture = self.capture, capture.wantsDrops, let bytes {
                capture.write(bytes, length: packet.length, delivered: false, atMonotonic: ncq_now())
            }
        }
    }
}
