import CNetcondPacket

#if canImport(Glibc)
import Glibc
#endif

/// The packet engine's end of netfilter's NFQUEUE: one netlink socket serving two queues, one per
/// direction. Every packet the cage's rules send there waits in the kernel until a verdict says
/// accept (now, or when the emulated link delivers it) or drop. Used by one thread only.
final class NetfilterQueue {
    let descriptor: Int32
    private(set) var bound: [UInt16] = []
    /// The NFLOG groups bound on the same socket (``bindLogGroups(_:copyRange:)``).
    private(set) var logGroups: [UInt16] = []
    private var batch = ncq_batch()
    private let buffer: UnsafeMutablePointer<UInt8>
    private let bufferSize = 4 << 20
    private let packets: UnsafeMutablePointer<ncq_packet>
    private let packetCapacity = 4096
    /// Netlink error replies seen (verdicts for packets the kernel no longer held).
    private(set) var errorReplies: Int32 = 0

    init() throws(PacketEngineError) {
        let fd = ncq_open()
        guard fd >= 0 else { throw .system("cannot open a netfilter netlink socket", -fd) }
        self.descriptor = fd
        self.buffer = .allocate(capacity: self.bufferSize)
        self.packets = .allocate(capacity: self.packetCapacity)
    }

    private var closed = false

    deinit {
        self.close()
        ncq_batch_free(&self.batch)
        self.buffer.deallocate()
        self.packets.deallocate()
    }

    /// Unbinds the queues (the kernel drops what they still hold) and closes the socket, so the
    /// numbers are free for the next run at once. Safe to call twice.
    func close() {
        guard !self.closed else { return }
        self.closed = true
        for queue in self.bound { _ = ncq_unbind(self.descriptor, queue) }
        for group in self.logGroups { _ = ncq_log_unbind(self.descriptor, group) }
        self.bound = []
        self.logGroups = []
        Glibc.close(self.descriptor)
    }

    /// The kernel's answer when a queue number is served by another socket (EPERM, or EBUSY).
    private static func isTaken(_ result: Int32) -> Bool { result == -EBUSY || result == -EPERM }

    /// Binds the first free pair of queue numbers from `start`; returns the first (the second is
    /// the next). Another netcond (or any program) may serve some numbers already.
    func bindPair(from start: UInt16, copyRange: UInt32) throws(PacketEngineError) -> UInt16 {
        var candidate = start
        for _ in 0..<64 {
            let first = ncq_bind(self.descriptor, candidate, copyRange, Self.maxQueued)
            if first == 0 {
                let second = ncq_bind(self.descriptor, candidate &+ 1, copyRange, Self.maxQueued)
                if second == 0 {
                    self.bound = [candidate, candidate &+ 1]
                    return candidate
                }
                _ = ncq_unbind(self.descriptor, candidate)
                if !Self.isTaken(second) { throw .system("cannot bind netfilter queue \(candidate &+ 1)", -second) }
            } else if !Self.isTaken(first) {
                throw .system("cannot bind netfilter queue \(candidate)", -first)
            }
            candidate = candidate &+ 2
            if candidate < 2 { candidate = 2 }
        }
        throw .system("no free netfilter queue numbers near \(start)", EBUSY)
    }

    /// Binds NFLOG groups `first` and `first + 1` on this socket: the copies of the packets the
    /// cage's rules pass in the kernel (``PacketCage``'s passing set) arrive in order with the
    /// queues' packets, as ``ncq_packet``s marked `logged` whose `queue` is the group. Returns
    /// whether both are bound (another program may hold a group: the engine then never passes in
    /// the kernel).
    func bindLogGroups(_ first: UInt16, copyRange: UInt32) -> Bool {
        guard ncq_log_bind(self.descriptor, first, copyRange) == 0 else { return false }
        guard ncq_log_bind(self.descriptor, first &+ 1, copyRange) == 0 else {
            _ = ncq_log_unbind(self.descriptor, first)
            return false
        }
        self.logGroups = [first, first &+ 1]
        return true
    }

    /// Whether a queue's GSO packets reach it whole (one verdict for many segments) or segmented.
    /// `waiting` for the kernel's answer is for before packets flow (it reads the socket).
    func setWholeGSO(_ whole: Bool, queue: UInt16, waiting: Bool) throws(PacketEngineError) {
        let result = ncq_set_gso(self.descriptor, queue, whole ? 1 : 0, waiting ? 1 : 0)
        guard result == 0 else { throw .system("cannot configure netfilter queue \(queue)", -result) }
    }

    /// Packets the kernel may hold waiting for verdicts; more are dropped, as by a full queue.
    static let maxQueued: UInt32 = 131_072

    /// Reads what is waiting (one datagram, many packets) and calls `body` with them, in the
    /// order the kernel queued them (their payloads are valid until the next read). Returns the
    /// number of packets, 0 when none were waiting, or -errno (-ENOBUFS: the kernel dropped packets
    /// it could not hand over).
    func receive(_ body: (UnsafeBufferPointer<ncq_packet>) -> Void) -> Int {
        let count = ncq_receive(
            self.descriptor, self.buffer, self.bufferSize, self.packets, Int32(self.packetCapacity), &self.errorReplies)
        guard count > 0 else { return Int(count) }
        body(UnsafeBufferPointer(start: self.packets, count: Int(count)))
        return Int(count)
    }

    func verdict(queue: UInt16, id: UInt32, accept: Bool, mark: UInt32, payload: [UInt8]? = nil) {
        let verdict = Int32(accept ? NCQ_ACCEPT : NCQ_DROP)
        if let payload {
            _ = payload.withUnsafeBufferPointer { bytes in
                ncq_batch_add(&self.batch, queue, id, verdict, mark, bytes.baseAddress, UInt32(bytes.count))
            }
        } else {
            _ = ncq_batch_add(&self.batch, queue, id, verdict, mark, nil, 0)
        }
    }

    /// Sends the verdicts gathered since the last flush; whether there were any.
    @discardableResult
    func flush() -> Bool {
        guard self.batch.count > 0 else { return false }
        _ = ncq_batch_flush(self.descriptor, &self.batch)
        return true
    }
}
