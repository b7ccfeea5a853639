/// A per-connection rate behind the shared link (`connection_bandwidth`, in both engines): each connection's packets leave the link no closer together than their time on the
/// wire at its rate, as behind a per-flow shaper; what would wait longer than the queue holds is
/// dropped.
///
/// ```
///  shared link delivers at t ──▶ max(t, this connection's last + size·8/rate) ──▶ the far end
///                                 waiting more than the queue's worth at that rate: dropped
/// ```
/// Pure and in virtual time, as the rest of the link path.
public struct ConnectionPacer<Key: Hashable> {
    @usableFromInline var last: [Key: Instant] = [:]

    public init() {}

    /// When a packet of `bytes` of connection `key`, delivered by the shared link at `delivered`,
    /// arrives at the rate `rate`; nil when the connection's backlog would exceed `limit`.
    @inlinable
    public mutating func pace(
        _ key: Key, bytes: Int, deliveredAt delivered: Instant, rate: Bandwidth, limit: QueueLimit
    ) -> Instant? {
        let next = max(delivered, (self.last[key] ?? delivered) + rate.transmissionTime(bytes: Int64(bytes)))
        let waiting = next - delivered
        let backlogBytes = Double(waiting.nanoseconds) / 1e9 * Double(rate.bitsPerSecond) / 8
        let limitBytes: Double
        switch limit {
        case .bytes(let bytes): limitBytes = Double(bytes.bytes)
        case .packets(let packets): limitBytes = Double(packets) * 1_500
        }
        if backlogBytes > limitBytes { return nil }
        self.last[key] = next
        return next
    }

    /// Forgets connections idle since before `moment` (their next packet starts afresh).
    @inlinable
    public mutating func forget(idleBefore moment: Instant) {
        self.last = self.last.filter { $0.value >= moment }
    }

    @inlinable public var count: Int { self.last.count }

    /// A stall of `length` began at `since`: a connection's spacing that ran past it runs that much later.
    mutating func shift(after since: Instant, by length: Span) {
        for (key, moment) in self.last where moment > since { self.last[key] = moment + length }
    }
}
