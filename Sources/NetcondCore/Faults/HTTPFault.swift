import Foundation

/// A fault the proxy injects into plain HTTP exchanges (and so into the built-in origin's):
/// which requests it hits (`match`, `select`) and what happens to them (`action`).
///
/// ```yaml
/// faults:
///   - {match: {path: /api/*}, status: 503, retry_after: 5s, first: 3}   # three 503s, then through
///   - {match: {method: POST, path: /orders}, drop_response: true}     # processed, never answered
///   - {match: {host: origin.netcond.test}, truncate_after: 100KB, fraction: 20%}
/// ```
public struct HTTPFault: Sendable, Equatable {
    public var name: String?
    public var match: RequestMatch
    public var action: HTTPFaultAction
    public var select: FaultSelection

    public init(name: String? = nil, match: RequestMatch = RequestMatch(), action: HTTPFaultAction, select: FaultSelection = FaultSelection()) {
        self.name = name
        self.match = match
        self.action = action
        self.select = select
    }

    /// What logs and `ctl fault list` call it: its name, else the action.
    public var label: String { self.name ?? self.action.description }
}

/// What a fault does to a request it hits.
public enum HTTPFaultAction: Sendable, Equatable, CustomStringConvertible {
    /// The proxy answers this status itself (the request never reaches the server).
    case status(Int, retryAfter: RetryAfter?)
    /// The request is forwarded; the response starts no earlier than this long after the request.
    case firstByte(Span)
    /// The response is cut after this many body bytes: the connection closes (FIN) mid-body.
    case truncateAfter(ByteCount)
    /// The response is cut after this many body bytes with a TCP reset.
    case resetAfter(ByteCount)
    /// The request is forwarded and processed; the response is thrown away and the connection
    /// closed without an answer (the lost acknowledgement).
    case dropResponse
    /// After the response the connection is closed, this much later than it would be.
    case slowClose(Span)

    public static let kinds = ["status", "first_byte", "truncate_after", "reset_after", "drop_response", "slow_close"]

    public var description: String {
        switch self {
        case .status(let code, let retryAfter):
            return "status \(code)" + (retryAfter.map { " (Retry-After: \($0.headerValue))" } ?? "")
        case .firstByte(let span): return "first byte after \(span)"
        case .truncateAfter(let bytes): return "truncate after \(bytes)"
        case .resetAfter(let bytes): return "reset after \(bytes)"
        case .dropResponse: return "drop the response"
        case .slowClose(let span): return "close \(span) late"
        }
    }
}

/// `Retry-After`: delay-seconds or an HTTP date, sent as written.
public enum RetryAfter: Sendable, Equatable {
    case seconds(Int)
    case date(String)

    public var headerValue: String {
        switch self {
        case .seconds(let seconds): return String(seconds)
        case .date(let date): return date
        }
    }
}

/// Which requests a fault looks at. Each field is a glob (`*` matches any run of characters);
/// nil matches anything. Hosts and methods compare case-insensitively, paths exactly (without the
/// query string).
public struct RequestMatch: Sendable, Equatable {
    /// Kept lower-case, so that matching lowers only the request's side.
    public var host: String? { didSet { self.host = self.host?.lowercased() } }
    public var path: String?
    /// Kept upper-case, so that matching raises only the request's side.
    public var method: String? { didSet { self.method = self.method?.uppercased() } }

    public init(host: String? = nil, path: String? = nil, method: String? = nil) {
        self.host = host?.lowercased()
        self.path = path
        self.method = method?.uppercased()
    }

    public func matches(_ request: FaultRequest) -> Bool {
        if let host = self.host, !Glob.matches(host, request.host.lowercased()) { return false }
        if let method = self.method, !Glob.matches(method, request.method.uppercased()) { return false }
        if let path = self.path, !Glob.matches(path, request.pathWithoutQuery) { return false }
        return true
    }
}

/// Which of the matching requests a fault hits: all of them by default, or the first N, a
/// fraction (seeded), and only inside a time window since the run started. All given conditions
/// must hold.
public struct FaultSelection: Sendable, Equatable {
    public var first: Int?
    public var fraction: Probability?
    public var from: Span?
    public var until: Span?

    public init(first: Int? = nil, fraction: Probability? = nil, from: Span? = nil, until: Span? = nil) {
        self.first = first
        self.fraction = fraction
        self.from = from
        self.until = until
    }
}

/// The request a fault is decided for.
public struct FaultRequest: Sendable, Equatable {
    public var method: String
    public var host: String
    /// Origin-form: `/path?query`.
    public var path: String

    public init(method: String, host: String, path: String) {
        self.method = method
        self.host = host
        self.path = path
    }

    var pathWithoutQuery: Substring {
        self.path.prefix { $0 != "?" }
    }
}

enum Glob {
    /// `*` matches any run of characters (also none); everything else matches itself.
    static func matches<S: StringProtocol>(_ pattern: String, _ text: S) -> Bool {
        let p = Array(pattern.utf8)
        let t = Array(text.utf8)
        var pi = 0
        var ti = 0
        var star = -1
        var mark = 0
        while ti < t.count {
            if pi < p.count && p[pi] == UInt8(ascii: "*") {
                star = pi
                mark = ti
                pi += 1
            } else if pi < p.count && p[pi] == t[ti] {
                pi += 1
                ti += 1
            } else if star >= 0 {
                pi = star + 1
                mark += 1
                ti = mark
            } else {
                return false
            }
        }
        while pi < p.count && p[pi] == UInt8(ascii: "*") { pi += 1 }
        return pi == p.count
    }
}
