/// How a client's connection attempt ended when it never reached a server: the values the proxy
/// (and later the packet engine) records and the scenario checks read. The raw values are the
/// event log's `outcome` text.
public enum AttemptOutcome: String, Sendable, Equatable, Codable, CaseIterable {
    /// The network refused it (an outage, a firewall's REJECT, a closed port).
    case refused
    /// It was reset before it was made (a captive portal resetting HTTPS).
    case reset
    /// Every SYN was lost until the kernel gave up (127 s).
    case timedOut = "timed out"
    /// The name did not resolve.
    case noSuchName = "no such name"
    /// Nothing answered (a blackhole), and it is still under way.
    case unanswered
    /// The client sent a request on a connection no server ever saw, and got nothing back.
    case noAnswer = "no answer"
    /// The client left while the connection was still being made.
    case abandoned
    /// On an IPv6-only network: it asked for a name's IPv4 address (an A record), which DNS64
    /// does not give.
    case noIPv4Address = "no IPv4 address"
    /// On an IPv6-only network: it connected (or sent) to an IPv4 address, which has no route.
    case noIPv4Route = "no IPv4 route"

    /// The network refused it (as opposed to swallowing it or failing a lookup).
    public var isRefusal: Bool { self == .refused || self == .reset }
    /// Nothing answered: swallowed by a blackhole, given up by the client or still waiting.
    public var isSilence: Bool { self == .unanswered || self == .noAnswer || self == .abandoned }
}

/// What a captive portal did, as the event log records it.
public enum PortalAction: String, Sendable, Equatable, Codable, CaseIterable {
    /// It answered a plain HTTP request in the server's place.
    case answered
    /// It stopped another connection (reset, blackhole, its own certificate).
    case intercepted
    case opened
    case closed
}
