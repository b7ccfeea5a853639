import Foundation

/// A fault: which requests it hits (`match`, `select`) and what happens to them (`action`). The
/// same value, written with the same keys, is a proxy fault (`faults:` in a profile) or an origin
/// fault (`origin.faults` in a scenario).
///
/// ```yaml
/// faults:
///   - {match: {path: /api/*}, status: 503, retry_after: 5s, first: 3}   # three 503s, then through
///   - {match: {method: POST, path: /orders}, drop_response: true}     # processed, never answered
///   - {match: {host: origin.netcond.test}, cut_after: 100KB, fraction: 20%}
///   - {file: big.bin, cut_after: 600KB, end: reset, requests: [1, 3]} # /files/big.bin on the origin
/// ```
public struct HTTPFault: Sendable, Equatable {
    public var name: String?
    public var match: RequestMatch
    public var action: FaultAction
    public var select: FaultSelection

    public init(
        name: String? = nil, match: RequestMatch = RequestMatch(), action: FaultAction,
        select: FaultSelection = FaultSelection()
    ) {
        self.name = name
        self.match = match
        self.action = action
        self.select = select
    }

    /// A fault on the origin's file `/files/NAME` (its GETs): what `{file: NAME, …}` reads as.
    public init(file: String, action: FaultAction, select: FaultSelection = FaultSelection()) {
        self.init(match: .file(file), action: action, select: select)
    }

    /// A fault on the origin's endpoint `/api/NAME` (calls with its method, any when nil): what
    /// `{api: NAME, …}` reads as.
    public init(api: String, method: String?, action: FaultAction, select: FaultSelection = FaultSelection()) {
        self.init(match: .api(api, method: method), action: action, select: select)
    }

    /// What logs and `ctl fault list` call it: its name, else the action.
    public var label: String { self.name ?? self.action.description }
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

    /// The GETs of the origin's `/files/NAME` (`file: NAME`).
    public static func file(_ name: String) -> RequestMatch {
        RequestMatch(path: OriginFile.path(of: name), method: "GET")
    }

    /// The calls of the origin's `/api/NAME` with `method` (any when nil) (`api: NAME`).
    public static func api(_ name: String, method: String?) -> RequestMatch {
        RequestMatch(path: OriginAPI.path(of: name), method: method)
    }

    public func matches(_ request: FaultRequest) -> Bool {
        if let host = self.host, !Glob.matches(host, request.host.lowercased()) { return false }
        if let method = self.method, !Glob.matches(method, request.method.uppercased()) { return false }
        if let path = self.path, !Glob.matches(path, request.pathWithoutQuery) { return false }
        return true
    }
}

/// Which of the requests a fault sees it hits: all of them by default; or the first N it hits,
/// or those with the given numbers; a fraction (seeded); and only inside a time window since the
/// run started. All given conditions must hold.
///
/// A fault sees the requests its match selects inside its window that no fault before it took,
/// and numbers them from 1: with `{file: a, status: 503, first: 2}` before
/// `{file: a, cut_after: 1KB, requests: [1]}`, requests 1 and 2 get the 503 and request 3 is cut.
public struct FaultSelection: Sendable, Equatable {
    /// Hits until it has hit this many.
    public var first: Int?
    /// Hits only the requests it sees with these numbers (from 1).
    public var requests: [Int]?
    public var fraction: Probability?
    public var from: Span?
    public var until: Span?

    public init(
        first: Int? = nil, requests: [Int]? = nil, fraction: Probability? = nil, from: Span? = nil,
        until: Span? = nil
    ) {
        self.first = first
        self.requests = requests
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
    /// The port it goes to (nil: not known; a route matched by port then does not take it).
    public var port: Int?
    /// The route the request's connection took (nil: none): a route's faults see only its own.
    public var route: Int?

    public init(method: String, host: String, path: String, port: Int? = nil, route: Int? = nil) {
        self.method = method
        self.host = host
        self.path = path
        self.port = port
        self.route = route
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
