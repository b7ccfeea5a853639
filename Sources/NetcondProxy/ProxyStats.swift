import NetcondCore

/// Counters of one proxy run, kept on the proxy's event loop.
final class ProxyStats {
    var connections = 0
    var bytesUp: Int64 = 0
    var bytesDown: Int64 = 0
    /// Down bytes the link has delivered to clients' sockets (`bytesDown` less what is on the link).
    var bytesDelivered: Int64 = 0
    var upstreamFailures = 0
    var badRequests = 0
    /// What splice relays moved (ProxyServer+Splice), counted as it is moved: not in the above.
    let spliced = SpliceTotals()
    /// Connections a splice relay took (among `connections`); some may have gone back to NIO since.
    var splicedConnections = 0

    /// Every byte from clients, to clients, and delivered to them, spliced or not.
    var upTotal: Int64 { self.bytesUp + self.spliced.up }
    var downTotal: Int64 { self.bytesDown + self.spliced.down }
    var deliveredTotal: Int64 { self.bytesDelivered + self.spliced.down }
}

/// A snapshot of a run's counters, for the summary line and status.
public struct ProxySummary: Sendable, Equatable {
    public var connections: Int
    public var bytesUp: Int64
    public var bytesDown: Int64
    public var upstreamFailures: Int
    public var badRequests: Int
    public var link: LinkCounters
    /// How late the link's timer woke: more than 20 ms late means netcond's own process was held
    /// up (an overloaded machine), and the link's timing was off by as much.
    public var timerLateness = LatenessHistogram()
}
