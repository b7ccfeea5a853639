/// What a fault does to a request it hits: one vocabulary for the proxy (`faults:` in a profile,
/// `netcond ctl fault add`, a scenario's timeline) and the built-in origin (`origin.faults` in a
/// scenario). Each end carries out every action; ``FaultEnd`` says how each one's reading differs.
public enum FaultAction: Sendable, Hashable, CustomStringConvertible {
    /// This status (with `Retry-After` when given) is answered instead: the request is not
    /// processed (the proxy does not forward it; the origin does not call its endpoint).
    case status(Int, retryAfter: RetryAfter?)
    /// The request is processed at once; its response starts no earlier than this long after the
    /// request (a slow server).
    case delay(Span)
    /// The response body stops after this many bytes, and the connection ends with a FIN or a reset.
    case cut(after: ByteCount, end: CutEnd)
    /// The request is processed (a POST's side effect happens); the response is thrown away and
    /// the connection closed without an answer: the lost acknowledgement.
    case dropResponse
    /// The request is processed; no response ever comes, and the connection stays open and silent
    /// until the client gives up.
    case hang
    /// The response is whole (with `Connection: close`); the connection closes this much later.
    case slowClose(Span)

    /// How a cut response's connection ends.
    public enum CutEnd: String, Sendable, Hashable, CaseIterable {
        /// An orderly close: the client reads a short body, then end of stream.
        case fin
        /// A TCP reset: the client's read fails (`ECONNRESET`).
        case reset
    }

    /// The keys that name an action, one per fault.
    public static let kinds = ["status", "delay", "cut_after", "drop_response", "hang", "slow_close"]

    public var description: String {
        switch self {
        case .status(let code, let retryAfter):
            return "status \(code)" + (retryAfter.map { " (Retry-After: \($0.headerValue))" } ?? "")
        case .delay(let span): return "answer after \(span)"
        case .cut(let bytes, .fin): return "cut after \(bytes)"
        case .cut(let bytes, .reset): return "cut after \(bytes) with a reset"
        case .dropResponse: return "drop the response"
        case .hang: return "never answer"
        case .slowClose(let span): return "close \(span) late"
        }
    }
}

/// `Retry-After`: delay-seconds or an HTTP date, sent as written.
public enum RetryAfter: Sendable, Hashable {
    case seconds(Int)
    case date(String)

    public var headerValue: String {
        switch self {
        case .seconds(let seconds): return String(seconds)
        case .date(let date): return date
        }
    }
}

/// Which end carries a fault out: the proxy, on every plain-HTTP request it forwards (any host),
/// or the built-in origin, on the requests that reach it.
public enum FaultEnd: Sendable, Equatable {
    case proxy
    case origin
}
