import CNetcondPacket
import NetcondCore

/// Passing in the kernel (Docs/engines.md): while the link holds nothing back, the cage's rules
/// pass every packet at once and copy it to the engine, which counts it afterwards as if it had
/// let it go at once (``letGoAtOnce(_:)``): no packet waits for the engine's thread.
extension PacketEngine {
    /// How long before a timeline's change the kernel stops passing: from then on packets wait in
    /// the queues again (and go at once while the link still passes everything), so the change
    /// meets each one at its moment even when the thread wakes late.
    static let passingLead: Int64 = 100_000_000
    /// How long no packet must have moved before the kernel starts passing: a packet queued just
    /// before the switch, still waiting for its verdict, could be overtaken by one passed after it.
    static let quietBeforePassing: Int64 = 2_000_000
    /// How often the thread reads the copies while the kernel passes: each copy has the moment the
    /// kernel passed it (on input; on output the moment it is read, at most this late).
    static let passingReadInterval: Int64 = 2_000_000

    /// Starts the kernel passing when the link passes everything at once, nothing is on it, no
    /// change of the timelines is near and no packet moved for a while; stops it when a change
    /// is near. Run by the thread before it follows the timelines.
    func considerPassingInKernel(lastMoved: Instant) {
        guard self.cage.passingInKernel || self.cage.canPassInKernel else { return }
        let now = self.now
        let next = self.driver.nextChangeInPlace()
        if self.cage.passingInKernel {
            if let next, (next - now).nanoseconds <= Self.passingLead { self.stopPassingInKernel() }
            return
        }
        guard self.configurationAtOnce.up, self.configurationAtOnce.down,
            (now - lastMoved).nanoseconds >= Self.quietBeforePassing,
            next.map({ ($0 - now).nanoseconds > 2 * Self.passingLead }) ?? true, self.copies.isEmpty,
            self.driver.nothingIsAheadAtOnceInPlace()
        else { return }
        // What was queued before the switch goes at once (nothing passed may overtake it for long).
        if self.cage.passInKernel(true) { _ = self.readAll() }
    }

    /// When the kernel must stop passing for the next change of the timelines (nil: it does not
    /// pass, or nothing changes by itself).
    func passingEnds() -> Instant? {
        guard self.cage.passingInKernel, let next = self.driver.nextChangeInPlace() else { return nil }
        return next - Span(nanoseconds: Self.passingLead)
    }

    /// Sends the cage's packets to the queues again, then reads the copies of what the kernel
    /// passed before (in order with what the queues got since, on the same socket).
    func stopPassingInKernel() {
        self.cage.passInKernel(false)
        _ = self.readAll()
    }

    /// Reads the copies waiting in the cage's ring (``PacketCage/ring``), in order: each as let go
    /// when the cage's program saw it. Whether there was any.
    func readRing() -> Bool {
        guard let ring = self.cage.ring else { return false }
        var any = false
        for _ in 0..<64 {
            let count = Int(ncq_ring_peek(ring, self.ringCopies, Int32(Self.ringBatch), self.upQueue))
            guard count > 0 else { break }
            any = true
            let readAt = self.now
            let offset = self.arrivals.read(offset: self.wallToEngine)
            for index in 0..<count { self.admit(self.ringCopies[index], readAt: readAt, offset: offset) }
            ncq_ring_release(ring)
            if count < Self.ringBatch { break }
        }
        if any {
            // The copies the ring had no room for, counted by its programs.
            let unseen = Int(clamping: ncq_ring_unseen(ring))
            self.driver.summary.passedUnseen += max(0, unseen - self.ringUnseen)
            self.ringUnseen = max(self.ringUnseen, unseen)
        }
        return any
    }

    /// How many of the ring's copies ``readRing()`` reads at a time.
    static let ringBatch = 256

    /// Counts a copy of a packet the kernel passed, and the copies missing before it (the log
    /// groups number theirs; the ring counts its own, ``readRing()``).
    func countPassed(_ packet: ncq_packet) {
        self.driver.summary.passedInKernel += Int(packet.segments)
        guard packet.logged == 1 else { return }
        let group = packet.queue == self.upQueue ? 0 : 1
        if let expected = self.nextCopyNumbers[group], packet.log_sequence != expected {
            let missing = packet.log_sequence &- expected
            if missing < 1 << 31 { self.driver.summary.passedUnseen += Int(missing) }
        }
        self.nextCopyNumbers[group] = packet.log_sequence &+ 1
    }
}
