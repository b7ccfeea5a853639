import Foundation

extension HTTPFault {
    static let selectionKeys = ["first", "fraction", "from", "until"]
    static let keys = ["name", "match"] + HTTPFaultAction.kinds + ["retry_after"] + Self.selectionKeys
    public static let example = "{match: {path: /api/*}, status: 503, retry_after: 5s, first: 3}"

    /// One fault from its own text (the control API's `POST /faults`; JSON is YAML too).
    public static func decode(yaml: String, file: String) throws(ConfigError) -> HTTPFault {
        try HTTPFault(node: ConfigNode.parse(yaml: yaml, file: file))
    }

    /// A `faults:` list.
    static func decodeList(_ node: ConfigNode) throws(ConfigError) -> [HTTPFault] {
        let list = try node.list()
        guard list.count <= 1000 else {
            throw node.error("\(list.count) faults; allowed: at most 1000")
        }
        var faults: [HTTPFault] = []
        for element in list { faults.append(try HTTPFault(node: element)) }
        return faults
    }

    init(node: ConfigNode) throws(ConfigError) {
        let map = try node.mapping(
            allowedKeys: Self.keys,
            expecting: "a fault: one of \(HTTPFaultAction.kinds.joined(separator: ", ")) with optional match: "
                + "and first/fraction/from/until (e.g. \(Self.example))"
        )
        let (kind, kindNode) = try map.single(of: HTTPFaultAction.kinds, thing: "fault", example: Self.example)
        if let nameNode = map["name"] {
            let name = try nameNode.name(expecting: "a short label", what: "the fault name", example: "flaky-api")
            // A name is how `remove_fault`, `DELETE /faults/NAME` and `ctl fault remove NAME` find it.
            guard !name.isEmpty, name.count <= 100, name != "all", Int(name) == nil, !name.contains("/") else {
                throw nameNode.error("'\(name)' cannot name a fault; allowed: a short label (not a number, not 'all', no '/'), e.g. flaky-api")
            }
            self.name = name
        } else {
            self.name = nil
        }
        self.match = try map["match"].map { node throws(ConfigError) in try RequestMatch(node: node) } ?? RequestMatch()
        self.action = try Self.action(kind, kindNode, retryAfter: map["retry_after"])
        self.select = try FaultSelection(map: map)
    }

    private static func action(_ kind: String, _ node: ConfigNode, retryAfter: ConfigNode?) throws(ConfigError) -> HTTPFaultAction {
        let retryAfter = try Self.retryAfter(retryAfter, kind: kind)
        switch kind {
        case "status":
            return .status(try Self.errorStatus(node), retryAfter: retryAfter)
        case "first_byte":
            return .firstByte(try Self.delay(node, example: "first_byte: 30s"))
        case "slow_close":
            return .slowClose(try Self.delay(node, example: "slow_close: 10s"))
        case "truncate_after":
            return .truncateAfter(try node.unit(ByteCount.parse))
        case "reset_after":
            return .resetAfter(try node.unit(ByteCount.parse))
        default:
            try node.onlyTrue("drop_response")
            return .dropResponse
        }
    }

    /// `retry_after:` of a fault whose action is `kind`: only a `status` fault may carry one.
    static func retryAfter(_ node: ConfigNode?, kind: String) throws(ConfigError) -> RetryAfter? {
        guard let node else { return nil }
        guard kind == "status" else {
            throw node.error("retry_after goes with status: (a 503 or 429 answered instead); allowed here: remove it")
        }
        return try RetryAfter(node: node)
    }

    /// `status: 503`: an error status the proxy or the origin answers instead.
    static func errorStatus(_ node: ConfigNode) throws(ConfigError) -> Int {
        let text = try node.numberText(expecting: "an HTTP status code, 400…599 (e.g. 503)")
        guard let code = Int(text), (400...599).contains(code) else {
            throw node.error("status '\(text)' is not an error status; allowed: 400…599 (e.g. 503, 429, 500)")
        }
        return code
    }

    private static func delay(_ node: ConfigNode, example: String) throws(ConfigError) -> Span {
        try node.span(in: .milliseconds(1)...(.seconds(Int64(3600))), allowed: "1ms…1h", example: example)
    }
}

extension RetryAfter {
    /// `5s`, `120` (seconds) or an HTTP date (`Wed, 21 Oct 2026 07:28:00 GMT`).
    init(node: ConfigNode) throws(ConfigError) {
        let text = try node.string(expecting: "seconds (5s, 120) or an HTTP date")
        if let seconds = Int(text), seconds >= 0 {
            self = .seconds(seconds)
            return
        }
        if let span = try? Span.parse(text) {
            guard span.nanoseconds % 1_000_000_000 == 0, span <= .seconds(Int64(86_400)) else {
                throw node.error("retry_after \(text) is not whole seconds up to a day; allowed: 0s…86400s (e.g. 5s)")
            }
            self = .seconds(Int(span.nanoseconds / 1_000_000_000))
            return
        }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard format.date(from: text) != nil else {
            throw node.error(
                "retry_after '\(text)' is neither seconds nor an HTTP date; allowed: 5s, 120, or Wed, 21 Oct 2026 07:28:00 GMT"
            )
        }
        self = .date(text)
    }
}

extension RequestMatch {
    static let keys = ["host", "path", "method"]

    init(node: ConfigNode) throws(ConfigError) {
        let map = try node.mapping(
            allowedKeys: Self.keys, expecting: "a mapping of host, path and method globs (e.g. {path: /api/*, method: POST})"
        )
        self.init()
        if let node = map["host"] {
            self.host = try node.string(expecting: "a host name or glob (e.g. *.example.com)")
        }
        if let node = map["path"] {
            let path = try node.string(expecting: "a path or glob (e.g. /files/*)")
            guard path.hasPrefix("/") || path.hasPrefix("*") else {
                throw node.error("path '\(path)' does not start with / or *; allowed: a path glob (e.g. /files/*)")
            }
            self.path = path
        }
        if let node = map["method"] {
            let method = try node.string(expecting: "an HTTP method (e.g. POST)")
            guard !method.isEmpty, method.allSatisfy({ $0.isLetter || $0 == "*" }) else {
                throw node.error("method '\(method)' is not a method; allowed: GET, POST, PUT, DELETE … or a glob")
            }
            self.method = method.uppercased()
        }
    }
}

extension FaultSelection {
    init(map: ConfigMapping) throws(ConfigError) {
        self.init()
        if let node = map["first"] {
            let text = try node.numberText(expecting: "a count (e.g. 3)")
            guard let first = Int(text), first >= 1 else {
                throw node.error("first '\(text)' is not a count; allowed: 1 or more (the first N matching requests)")
            }
            self.first = first
        }
        if let node = map["fraction"] {
            let fraction = try node.unit(Probability.parse)
            guard fraction.value > 0 else {
                throw node.error("fraction 0% hits nothing; allowed: above 0% up to 100% (e.g. 20%)")
            }
            self.fraction = fraction
        }
        if let node = map["from"] { self.from = try node.unit(Span.parse) }
        if let node = map["until"] {
            let until = try node.unit(Span.parse)
            if let from = self.from, until <= from {
                throw node.error("until \(until) is not after from \(from); allowed: a window from < until (e.g. from: 10s, until: 40s)")
            }
            self.until = until
        }
    }
}

extension HTTPFault {
    /// The fault in the schema's flow style; `decode(yaml:)` reads it back to an equal fault.
    public var yamlDescription: String {
        var parts: [String] = []
        if let name = self.name { parts.append("name: \(Profile.quoted(name))") }
        var match: [String] = []
        if let host = self.match.host { match.append("host: \(Profile.quoted(host))") }
        if let path = self.match.path { match.append("path: \(Profile.quoted(path))") }
        if let method = self.match.method { match.append("method: \(Profile.quoted(method))") }
        if !match.isEmpty { parts.append("match: {\(match.joined(separator: ", "))}") }
        switch self.action {
        case .status(let code, let retryAfter):
            parts.append("status: \(code)")
            switch retryAfter {
            case .seconds(let seconds)?: parts.append("retry_after: \(seconds)s")
            case .date(let date)?: parts.append("retry_after: \(Profile.quoted(date))")
            case nil: break
            }
        case .firstByte(let span): parts.append("first_byte: \(Profile.exact(span))")
        case .slowClose(let span): parts.append("slow_close: \(Profile.exact(span))")
        case .truncateAfter(let bytes): parts.append("truncate_after: \(Profile.exact(bytes))")
        case .resetAfter(let bytes): parts.append("reset_after: \(Profile.exact(bytes))")
        case .dropResponse: parts.append("drop_response: true")
        }
        if let first = self.select.first { parts.append("first: \(first)") }
        if let fraction = self.select.fraction { parts.append("fraction: \(Profile.exact(fraction))") }
        if let from = self.select.from { parts.append("from: \(Profile.exact(from))") }
        if let until = self.select.until { parts.append("until: \(Profile.exact(until))") }
        return "{" + parts.joined(separator: ", ") + "}"
    }
}
