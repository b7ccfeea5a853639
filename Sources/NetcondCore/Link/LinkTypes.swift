/// Identifies one connection within a `LinkModel`; numbered in the order connections opened.
public struct FlowID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public static func < (lhs: FlowID, rhs: FlowID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "#\(self.rawValue)" }
}

/// Bytes of one connection and direction that reached the other end, in order, at `at`.
public struct Delivery: Equatable, Sendable {
    public var flow: FlowID
    public var direction: Direction
    public var bytes: Int
    public var at: Instant

    public init(flow: FlowID, direction: Direction, bytes: Int, at: Instant) {
        self.flow = flow
        self.direction = direction
        self.bytes = bytes
        self.at = at
    }
}

/// What became of a connection attempt.
public enum ConnectOutcome: Equatable, Sendable {
    /// The handshake completed at this instant, after this many SYN retransmissions.
    case established(at: Instant, synRetransmits: Int)
    /// Refused (a `refuse` or `reset` outage): the client sees the refusal at this instant.
    case refused(at: Instant)
    /// Every attempt was lost; the client's kernel gives up at this instant.
    case timedOut(at: Instant)
    /// The profile's firewall does not allow the port (`otherwise: refuse`).
    case refusedByFirewall(at: Instant)
    /// The name is in the profile's `dns_fail` list.
    case nameNotResolved(at: Instant)

    /// The same outcome, at `instant`.
    func happening(at instant: Instant) -> ConnectOutcome {
        switch self {
        case .established(_, let retransmits): return .established(at: instant, synRetransmits: retransmits)
        case .refused: return .refused(at: instant)
        case .timedOut: return .timedOut(at: instant)
        case .refusedByFirewall: return .refusedByFirewall(at: instant)
        case .nameNotResolved: return .nameNotResolved(at: instant)
        }
    }
}

/// Something the driver must act on or report, in the order it happened.
public enum LinkNotice: Equatable, Sendable {
    /// The first SYN that reaches the server leaves now (the path decided so when it was offered;
    /// one a stall held says so when it arrives): the server's side learns of the connection from
    /// here on, and never before. Its SYN-ACK may still be lost (the client then retries, and a
    /// handshake that never completes ends the attempt). Before a refused or blackholed attempt, or
    /// one a rule stops, there is none.
    case handshakeUnderWay(FlowID, at: Instant)
    /// A `connect` finished.
    case connected(FlowID, ConnectOutcome)
    /// The connection was cut (a `reset` outage began: `.reset`; or a cut); the model has forgotten it.
    case cut(FlowID, CutMode, at: Instant)
    /// The link's state changed: a schedule phase began or ended, an outage or a stall began or ended.
    case stateChanged(LinkState, at: Instant)
}

/// What the link is doing, for the status line and the event log.
public struct LinkState: Equatable, Sendable, CustomStringConvertible {
    /// The schedule phase in force (`lte`, `tunnel`), or the profile's name outside a schedule.
    public var phase: String
    public var outage: OutageBehaviour?
    /// Directions in which no byte moves now.
    public var stalled: [Direction]

    public init(phase: String, outage: OutageBehaviour? = nil, stalled: [Direction] = []) {
        self.phase = phase
        self.outage = outage
        self.stalled = stalled
    }

    public var description: String {
        var parts = [self.phase]
        if let outage = self.outage { parts.append("outage (\(outage))") }
        if !self.stalled.isEmpty {
            parts.append("stalled " + (self.stalled.count == 2 ? "both ways" : self.stalled[0].description))
        }
        return parts.joined(separator: ", ")
    }
}

/// Totals for the run summary.
public struct LinkCounters: Equatable, Sendable {
    public var connections = 0
    public var bytesUp: Int64 = 0
    public var bytesDown: Int64 = 0
    /// Each direction's transmissions and drops, kept apart (`/metrics` says them per direction);
    /// the totals below add the two.
    public var up = LinkDirectionCounters()
    public var down = LinkDirectionCounters()
    /// Transmissions put on the link, retransmissions included.
    public var segmentsSent: Int { self.up.segmentsSent + self.down.segmentsSent }
    /// Transmissions lost on the wire (the profile's loss process).
    public var segmentsLost: Int { self.up.segmentsLost + self.down.segmentsLost }
    /// Transmissions dropped because the bottleneck queue was full.
    public var queueDrops: Int { self.up.queueDrops + self.down.queueDrops }
    public var retransmissions = 0
    public var timeouts = 0
    /// Segments delivered later than they arrived (held behind a hole) or only after a repair.
    public var segmentsDelayed = 0
    /// Bytes that crossed the link, counted as each segment reached the receiver: one held behind a
    /// hole counts when it came, not when the repair let the receiver pass it on (``bytesUp`` and
    /// ``bytesDown`` count that). What the link carried, at its rate while it was busy.
    public var bytesArrivedUp: Int64 = 0
    public var bytesArrivedDown: Int64 = 0
    /// Transmissions lost because an outage was in force.
    public var outageDrops: Int { self.up.outageDrops + self.down.outageDrops }
    /// Connections reset by a `reset` outage or a `reset` cut.
    public var resets = 0
    /// Connections closed early by a `close` cut.
    public var closes = 0
    /// Connection attempts that met a firewall rule or a `dns_fail` name.
    public var setupFailures = 0
    /// Connection attempts refused by a `refuse` or `reset` outage.
    public var refusedConnections = 0

    public init() {}

    public subscript(_ direction: Direction) -> LinkDirectionCounters {
        get { direction == .up ? self.up : self.down }
        set {
            if direction == .up { self.up = newValue } else { self.down = newValue }
        }
    }
}

/// One direction's transmissions on the link and its drops, by cause.
public struct LinkDirectionCounters: Equatable, Sendable {
    /// Transmissions put on the link, retransmissions included.
    public var segmentsSent = 0
    /// Lost on the wire (the profile's loss process, or a corrupted segment).
    public var segmentsLost = 0
    /// Dropped by a full bottleneck queue or its AQM.
    public var queueDrops = 0
    /// Lost because an outage was in force, or the connection was stranded by a handover.
    public var outageDrops = 0

    public init() {}
}
