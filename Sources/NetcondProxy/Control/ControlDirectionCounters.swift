import NetcondCore

/// One direction's packets on the link and its drops by cause, as `GET /status` lists them under
/// `directions` (down, then up): `/metrics` labels its packet and drop counters with the direction
/// from these. Under the proxy engine a packet is one of the emulated senders' segments.
public struct ControlDirectionCounters: Codable, Equatable, Sendable {
    /// `down` or `up`.
    public var direction: String
    /// Packets put on the link (offered to it under the packet engine), retransmissions included.
    public var packets: Int
    /// Lost by the profile's loss process (or corrupted).
    public var lost: Int
    /// Dropped by a full queue, or its AQM.
    public var queueDrops: Int
    /// Dropped while an outage (a blackhole) was in force.
    public var outageDrops: Int

    public init(direction: Direction, packets: Int, lost: Int, queueDrops: Int, outageDrops: Int) {
        self.direction = direction.rawValue
        self.packets = packets
        self.lost = lost
        self.queueDrops = queueDrops
        self.outageDrops = outageDrops
    }

    /// The stream engine's counts of one direction.
    public init(_ direction: Direction, _ counters: LinkDirectionCounters) {
        self.init(
            direction: direction, packets: counters.segmentsSent, lost: counters.segmentsLost,
            queueDrops: counters.queueDrops, outageDrops: counters.outageDrops)
    }

    enum CodingKeys: String, CodingKey {
        case direction, packets, lost
        case queueDrops = "queue_drops"
        case outageDrops = "outage_drops"
    }
}
