import Foundation

/// What a fault is decoded against: the end that carries it out, and the scenario's origin
/// content when there is one (so `file:` and `api:` name what exists).
public struct FaultContext: Sendable {
    public var end: FaultEnd
    public var origin: OriginContent?

    public init(end: FaultEnd, origin: OriginContent? = nil) {
        self.end = end
        self.origin = origin
    }

    /// A profile's `faults:`, a live `POST /faults`: the proxy's, no scenario around them.
    public static let proxy = FaultContext(end: .proxy)
}

extension HTTPFault {
    static let targetKeys = ["match", "file", "api"]
    static let selectionKeys = ["first", "requests", "fraction", "from", "until"]
    /// Older spellings that still read: each with what it now is.
    static let oldSpellings: KeyValuePairs = [
        "first_byte": "delay: (the response starts no earlier than this)",
        "truncate_after": "cut_after: (ends with a FIN, as end: fin)",
        "reset_after": "cut_after: with end: reset",
    ]
    static let actionKeys = FaultAction.kinds + Self.oldSpellings.map(\.key)
    static let keys = ["name"] + Self.targetKeys + Self.actionKeys + ["retry_after", "end"] + Self.selectionKeys
    public static let example = "{match: {path: /api/*}, status: 503, retry_after: 5s, first: 3}"

    /// One fault from its own text (the control API's `POST /faults`; JSON is YAML too).
    public static func decode(yaml: String, file: String) throws(ConfigError) -> HTTPFault {
        try HTTPFault(node: ConfigNode.parse(yaml: yaml, file: file), context: .proxy)
    }

    /// A `faults:` list (a profile's, or a scenario's `origin.faults`).
    static func decodeList(_ node: ConfigNode, context: FaultContext) throws(ConfigError) -> [HTTPFault] {
        let list = try node.list()
        guard list.count <= 1000 else {
            throw node.error("\(list.count) faults; allowed: at most 1000")
        }
        var faults: [HTTPFault] = []
        for element in list { faults.append(try HTTPFault(node: element, context: context)) }
        return faults
    }

    init(node: ConfigNode, context: FaultContext) throws(ConfigError) {
        let map = try node.mapping(
            allowedKeys: Self.keys,
            expecting: "a fault: one of \(FaultAction.kinds.joined(separator: ", ")) with optional match: (or file:, "
                + "api:) and first/requests/fraction/from/until (e.g. \(Self.example))"
        )
        let (kind, kindNode) = try map.single(of: Self.actionKeys, thing: "fault", example: Self.example)
        self.name = try map["name"].map { node throws(ConfigError) in try Self.name(node) }
        self.match = try Self.match(map, context: context)
        self.action = try Self.action(kind, kindNode, map: map)
        self.select = try FaultSelection(map: map)
    }

    private static func name(_ node: ConfigNode) throws(ConfigError) -> String {
        let name = try node.name(expecting: "a short label", what: "the fault name", example: "flaky-api")
        // A name is how `remove_fault`, `DELETE /faults/NAME` and `ctl fault remove NAME` find it.
        guard !name.isEmpty, name.count <= 100, name != "all", Int(name) == nil, !name.contains("/") else {
            throw node.error(
                "'\(name)' cannot name a fault; allowed: a short label (not a number, not 'all', no '/'), e.g. flaky-api"
            )
        }
        return name
    }

    /// `match:`, or its short forms `file: NAME` (GETs of `/files/NAME`) and `api: NAME` (calls of
    /// `/api/NAME` with the endpoint's method): one of the three.
    private static func match(_ map: ConfigMapping, context: FaultContext) throws(ConfigError) -> RequestMatch {
        let given = map.entries.filter { Self.targetKeys.contains($0.key) }  // in the file's order
        if given.count > 1 {
            throw given[1].value.error(
                "\(given[0].key) and \(given[1].key) both say which requests; allowed: one of match:, file: or api: "
                    + "(file: NAME is match: {path: /files/NAME, method: GET})")
        }
        guard let (key, node) = given.first else { return RequestMatch() }
        switch key {
        case "file":
            let name = try node.string(expecting: "a file name from origin.files")
            if let origin = context.origin, origin.file(named: name) == nil {
                throw node.error(
                    Suggestion.unknown("file", name, among: origin.files.map(\.name), listedAs: "files in origin.files")
                )
            }
            return RequestMatch.file(name)
        case "api":
            let name = try node.string(expecting: "an endpoint name from origin.api")
            guard let origin = context.origin else { return RequestMatch.api(name, method: nil) }
            guard let api = origin.api(named: name) else {
                throw node.error(
                    Suggestion.unknown(
                        "endpoint", name, among: origin.api.map(\.name), listedAs: "endpoints in origin.api"))
            }
            return RequestMatch.api(name, method: api.method.rawValue)
        default:
            return try RequestMatch(node: node)
        }
    }

    private static func action(_ kind: String, _ node: ConfigNode, map: ConfigMapping) throws(ConfigError)
        -> FaultAction
    {
        if let spelling = Self.oldSpellings.first(where: { $0.key == kind })?.value {
            ConfigNotices.note(node, "'\(kind)' is the old spelling; it reads as \(spelling)")
        }
        let retryAfter = try Self.retryAfter(map["retry_after"], kind: kind)
        let end = try Self.cutEnd(map["end"], kind: kind)
        switch kind {
        case "status":
            return .status(try Self.errorStatus(node), retryAfter: retryAfter)
        case "delay", "first_byte":
            return .delay(try Self.delay(node, example: "\(kind): 30s"))
        case "slow_close":
            return .slowClose(try Self.delay(node, example: "slow_close: 10s"))
        case "cut_after", "truncate_after":
            return .cut(after: try node.unit(ByteCount.parse), end: end)
        case "reset_after":
            return .cut(after: try node.unit(ByteCount.parse), end: .reset)
        case "hang":
            try node.onlyTrue("hang")
            return .hang
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

    /// `end: fin|reset` of a fault whose action is `kind`: only a cut has an end to choose.
    private static func cutEnd(_ node: ConfigNode?, kind: String) throws(ConfigError) -> FaultAction.CutEnd {
        guard let node else { return .fin }
        guard kind == "cut_after" else {
            throw node.error(
                "end says how a cut ends and goes with cut_after: (e.g. {cut_after: 100KB, end: reset}); "
                    + "allowed here: remove it")
        }
        return try node.choice(FaultAction.CutEnd.self)
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
                "retry_after '\(text)' is neither seconds nor an HTTP date; "
                    + "allowed: 5s, 120, or Wed, 21 Oct 2026 07:28:00 GMT")
        }
        self = .date(text)
    }
}

extension RequestMatch {
    static let keys = ["host", "path", "method"]

    init(node: ConfigNode) throws(ConfigError) {
        let map = try node.mapping(
            allowedKeys: Self.keys,
            expecting: "a mapping of host, path and method globs (e.g. {path: /api/*, method: POST})"
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
                throw node.error("first '\(text)' is not a count; allowed: 1 or more (the first N requests it hits)")
            }
            self.first = first
        }
        if let node = map["requests"] {
            if map["first"] != nil {
                throw node.error("first and requests both pick requests by number; allowed: one of them")
            }
            self.requests = try Self.numbers(node)
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
                throw node.error(
                    "until \(until) is not after from \(from); allowed: a window from < until (e.g. from: 10s, until: 40s)"
                )
            }
            self.until = until
        }
    }

    /// `requests: [1, 3]`: numbers from 1, of the requests the fault sees.
    private static func numbers(_ node: ConfigNode) throws(ConfigError) -> [Int] {
        let list = try node.list()
        guard !list.isEmpty else {
            throw node.error("the list is empty; allowed: request numbers from 1 (e.g. [1, 3])")
        }
        guard list.count <= 1000 else { throw node.error("\(list.count) numbers; allowed: at most 1000") }
        var numbers: [Int] = []
        for element in list {
            numbers.append(try element.integer(in: 1...1_000_000, meaning: "a request number, from 1"))
        }
        return numbers
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
        parts += self.action.yamlParts
        if let first = self.select.first { parts.append("first: \(first)") }
        if let numbers = self.select.requests {
            parts.append("requests: [\(numbers.map(String.init).joined(separator: ", "))]")
        }
        if let fraction = self.select.fraction { parts.append("fraction: \(Profile.exact(fraction))") }
        if let from = self.select.from { parts.append("from: \(Profile.exact(from))") }
        if let until = self.select.until { parts.append("until: \(Profile.exact(until))") }
        return "{" + parts.joined(separator: ", ") + "}"
    }
}

extension FaultAction {
    /// The action's keys in the schema's flow style.
    var yamlParts: [String] {
        switch self {
        case .status(let code, let retryAfter):
            switch retryAfter {
            case .seconds(let seconds)?: return ["status: \(code)", "retry_after: \(seconds)s"]
            case .date(let date)?: return ["status: \(code)", "retry_after: \(Profile.quoted(date))"]
            case nil: return ["status: \(code)"]
            }
        case .delay(let span): return ["delay: \(Profile.exact(span))"]
        case .slowClose(let span): return ["slow_close: \(Profile.exact(span))"]
        case .cut(let bytes, .fin): return ["cut_after: \(Profile.exact(bytes))"]
        case .cut(let bytes, .reset): return ["cut_after: \(Profile.exact(bytes))", "end: reset"]
        case .dropResponse: return ["drop_response: true"]
        case .hang: return ["hang: true"]
        }
    }
}
