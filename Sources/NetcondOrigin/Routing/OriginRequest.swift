import NIOHTTP1

/// A request head as endpoints see it: the method, the target split into path segments and query parameters, and
/// the headers. Built once per request by the handler; pure, so routing is testable without a channel.
struct OriginRequest: Sendable {
    var method: HTTPMethod
    /// The target exactly as received.
    var target: String
    /// Non-empty path segments: `/bytes/1KB/` → `["bytes", "1KB"]`. `nil` when the target is not a path (`*`, junk).
    var segments: [Substring]?
    /// Query parameters in order of appearance (not percent-decoded: every value the origin reads is ASCII).
    var query: [(name: Substring, value: Substring)]
    var headers: HTTPHeaders
    /// The port of the listener it came on when the request names none: 443 over TLS, else 80.
    var listenerPort = 80

    init(method: HTTPMethod, target: String, headers: HTTPHeaders = [:], listenerPort: Int = 80) {
        self.listenerPort = listenerPort
        self.method = method
        self.target = target
        self.headers = headers
        var rest = Substring(target)
        var isAbsoluteForm = false
        // A proxy may forward the absolute form (`http://origin.netcond.test/bytes/1KB`); keep only the path.
        if let schemeEnd = rest.range(of: "://"), !rest[..<schemeEnd.lowerBound].isEmpty,
            rest[..<schemeEnd.lowerBound].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) })
        {
            let afterScheme = rest[schemeEnd.upperBound...]
            rest = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }).map { afterScheme[$0...] } ?? ""
            isAbsoluteForm = true
        }
        if let hash = rest.firstIndex(of: "#") {
            rest = rest[..<hash]
        }
        let path: Substring
        let queryText: Substring
        if let question = rest.firstIndex(of: "?") {
            path = rest[..<question]
            queryText = rest[rest.index(after: question)...]
        } else {
            path = rest
            queryText = ""
        }
        if path.first == "/" {
            self.segments = path.split(separator: "/")
        } else if path.isEmpty && isAbsoluteForm {
            self.segments = []
        } else {
            self.segments = nil
        }
        self.query = queryText.split(separator: "&").map { pair in
            if let equals = pair.firstIndex(of: "=") {
                return (pair[..<equals], pair[pair.index(after: equals)...])
            }
            return (pair, "")
        }
    }

    /// The first value of query parameter `name`, if present.
    func queryValue(_ name: String) -> Substring? {
        self.query.first(where: { $0.name == name })?.value
    }
}

extension OriginRequest {
    /// The host the request asked for: an absolute-form target's (RFC 9112 §3.2.2), else the `Host`
    /// header's; lower case, without the port. Nil when it named none.
    /// The port the request names (an absolute-form target's, else `Host:`'s), nil when it names
    /// none (80 or 443 then, by the connection).
    var port: Int? {
        var authority = Substring(self.headers.first(name: "host") ?? "")
        if let scheme = self.target.range(of: "://") {
            authority = self.target[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" }
        }
        if let close = authority.lastIndex(of: "]") { authority = authority[authority.index(after: close)...] }
        guard let colon = authority.lastIndex(of: ":") else { return nil }
        return Int(authority[authority.index(after: colon)...])
    }

    var host: String? {
        if let host = OriginFaults.absoluteHost(self.target) { return host }
        guard let header = self.headers.first(name: "host") else { return nil }
        let host = OriginFaults.hostWithoutPort(header).lowercased()
        return host.isEmpty ? nil : host
    }
}
