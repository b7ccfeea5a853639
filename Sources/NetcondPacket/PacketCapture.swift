import CNetcondPacket

/// `--pcap FILE` and `--pcap-drops FILE`: every packet the link delivered, both directions, stamped
/// with the moment it left the link; and every packet it dropped (loss, a full queue, an outage),
/// stamped with the moment it was dropped. Written through libpcap (raw IP link type: `tcpdump -r`
/// and `tshark -r` read them), loaded at run time, so netcond builds without it. Written by the
/// engine's thread only, and closed by ``close()`` once that thread has ended.
public final class PacketCapture: @unchecked Sendable {
    private var delivered: OpaquePointer?
    private var dropped: OpaquePointer?
    /// Unix time at the engine's monotonic zero, to stamp packets with the wall clock.
    private let wallAtStart: Int64
    private let monotonicAtStart: Int64

    public init(deliveredPath: String?, droppedPath: String?) throws(PacketEngineError) {
        func open(_ path: String?) throws(PacketEngineError) -> OpaquePointer? {
            guard let path else { return nil }
            var message = [CChar](repeating: 0, count: 512)
            guard let capture = ncq_capture_open(path, &message, message.count) else {
                let text = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                throw .capture(path, text)
            }
            return capture
        }
        self.delivered = try open(deliveredPath)
        do {
            self.dropped = try open(droppedPath)
        } catch {
            ncq_capture_close(self.delivered)
            throw error
        }
        self.monotonicAtStart = ncq_now()
        self.wallAtStart = ncq_wall_now()
    }

    deinit { self.close() }

    /// Writes out what is buffered and closes the files. Safe to call twice.
    public func close() {
        ncq_capture_close(self.delivered)
        ncq_capture_close(self.dropped)
        self.delivered = nil
        self.dropped = nil
    }

    /// Writes a packet that left the link (`delivered`) or was dropped, at monotonic `moment` (ns).
    func write(_ bytes: [UInt8], length: UInt32, delivered: Bool, atMonotonic moment: Int64) {
        guard let capture = delivered ? self.delivered : self.dropped else { return }
        let stamp = self.wallAtStart + (moment - self.monotonicAtStart)
        bytes.withUnsafeBufferPointer { buffer in
            ncq_capture_write(
                capture, stamp, buffer.baseAddress, UInt32(buffer.count), max(length, UInt32(buffer.count)))
        }
    }

    var wantsDrops: Bool { self.dropped != nil }

    func flush() {
        if let delivered { ncq_capture_flush(delivered) }
        if let dropped { ncq_capture_flush(dropped) }
    }
}
