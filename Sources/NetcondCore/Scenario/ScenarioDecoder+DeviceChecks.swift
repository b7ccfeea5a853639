/// The checks of a device that moves (issue 41): `revalidates`, `overlaps`, `delivers`.
extension ScenarioDecoder {

    /// `revalidates: {file: NAME}` or `{api: NAME}` (default: the client's url), `min_fetches`.
    static func revalidates(_ value: ConfigNode, context: CheckContext) throws(ConfigError) -> RevalidatesCheck {
        let spec = try value.mapping(allowedKeys: ["file", "api", "min_fetches"])
        let target: OriginTarget
        if let file = spec["file"] {
            if let api = spec["api"] {
                throw api.error("file and api exclude each other; allowed: one of them (the resource fetched again)")
            }
            target = .file(try context.fileReference(file, in: value))
        } else if let node = spec["api"] {
            target = .api(try Self.getEndpoint(node, context: context))
        } else if let file = context.defaultFile {
            target = .file(file)
        } else if let api = Self.urlAPI(context.client), context.origin.api(named: api)?.method == .get {
            target = .api(api)
        } else {
            throw value.error(
                "which resource? the client's url is not a file or a GET endpoint of the origin; allowed: file: NAME from origin.files or api: NAME from origin.api"
            )
        }
        var check = RevalidatesCheck(target: target)
        if let minimum = spec["min_fetches"] {
            check.minFetches = try minimum.integer(in: 2...10_000, meaning: "how many fetches of the resource")
        }
        return check
    }

    /// `api: NAME` naming a POST endpoint of origin.api, or (absent) the client's url's.
    static func postEndpoint(_ node: ConfigNode?, in check: ConfigNode, context: CheckContext)
        throws(ConfigError) -> String
    {
        guard let node else {
            guard let name = Self.urlAPI(context.client), context.origin.api(named: name)?.method == .post else {
                throw check.error(
                    "which endpoint? the client's url is not a POST endpoint of origin.api; allowed: api: NAME")
            }
            return name
        }
        let api = try node.string(expecting: "an endpoint name from origin.api")
        guard let endpoint = context.origin.api(named: api) else {
            throw node.error(
                Suggestion.unknown(
                    "endpoint", api, among: context.origin.api.map(\.name), listedAs: "endpoints in origin.api"))
        }
        guard endpoint.method == .post else {
            throw node.error("\(endpoint.path) is a GET endpoint; allowed: a POST endpoint from origin.api")
        }
        return api
    }

    /// `api: NAME` naming a GET endpoint of origin.api.
    private static func getEndpoint(_ node: ConfigNode, context: CheckContext) throws(ConfigError) -> String {
        let api = try node.string(expecting: "an endpoint name from origin.api")
        guard let endpoint = context.origin.api(named: api) else {
            throw node.error(
                Suggestion.unknown(
                    "endpoint", api, among: context.origin.api.map(\.name), listedAs: "endpoints in origin.api"))
        }
        guard endpoint.method == .get else {
            throw node.error("\(endpoint.path) is a POST endpoint; allowed: a GET endpoint from origin.api")
        }
        return api
    }

    /// `overlaps: {requests: GLOB, host: GLOB, min_in_flight: N, min_requests: N}`.
    static func overlaps(_ value: ConfigNode) throws(ConfigError) -> OverlapsCheck {
        let spec = try value.mapping(allowedKeys: ["requests", "host", "min_in_flight", "min_requests"])
        guard let requests = spec["requests"] else {
            throw value.error(
                "which requests? allowed: requests: GLOB, the origin paths of the independent requests (e.g. requests: /files/*)"
            )
        }
        let glob = try requests.string(expecting: "a path glob for the requests sent together (e.g. /files/*)")
        guard glob.hasPrefix("/") else {
            throw requests.error("'\(glob)' is not a path; allowed: a glob starting with / (e.g. /files/*)")
        }
        var check = OverlapsCheck(requests: glob)
        if let host = spec["host"] {
            let name = try host.string(expecting: "a host name or glob (e.g. static.netcond.test)")
            guard !name.isEmpty, !name.contains(" "), !name.contains("/"), !name.contains(":") else {
                throw host.error("'\(name)' is not a host name; allowed: a name or glob such as static.netcond.test")
            }
            check.host = name.lowercased()
        }
        if let node = spec["min_in_flight"] {
            check.minInFlight = try node.integer(in: 2...1000, meaning: "how many requests in flight at once")
        }
        check.minRequests = check.minInFlight
        if let node = spec["min_requests"] {
            let minimum = try node.integer(in: 1...100_000, meaning: "how many requests must reach the origin")
            guard minimum >= check.minInFlight else {
                throw node.error(
                    "min_requests \(minimum) is fewer than min_in_flight \(check.minInFlight); allowed: \(check.minInFlight) or more"
                )
            }
            check.minRequests = minimum
        }
        return check
    }

    /// `delivers: {api: NAME, count: N, within: DURATION}` (api: the client's url by default).
    static func delivers(_ value: ConfigNode, context: CheckContext) throws(ConfigError) -> DeliversCheck {
        let spec = try value.mapping(allowedKeys: ["api", "count", "within"])
        let api = try Self.postEndpoint(spec["api"], in: value, context: context)
        guard let count = spec["count"] else {
            throw value.error(
                "how many changes? allowed: count: N, the changes the client makes (each with an Idempotency-Key ending in its number, change-1 … change-N)"
            )
        }
        var check = DeliversCheck(
            api: api, count: try count.integer(in: 1...10_000, meaning: "how many changes the client makes"))
        if let within = spec["within"] {
            check.within = try within.span(
                in: .milliseconds(1)...(.seconds(Int64(3600))), allowed: "1ms…1h", example: "within: 10s")
        }
        return check
    }

    /// Sets each `delivers` check's moment of the network's return from the timeline: its last
    /// `{at: T, outage: end}`. Without one there is no return to judge by.
    static func placeNetworkReturn(
        _ checks: [CheckSpec], timeline: [ScenarioEvent], checksNode: ConfigNode
    ) throws(ConfigError) -> [CheckSpec] {
        let returns = timeline.compactMap { event -> Span? in
            guard case .at(let span) = event.trigger, case .outage(nil) = event.action else { return nil }
            return span
        }
        var placed: [CheckSpec] = []
        for check in checks {
            guard case .delivers(var delivers) = check else {
                placed.append(check)
                continue
            }
            guard let back = returns.max() else {
                let node = (try? checksNode.mapping(allowedKeys: CheckSpec.names))?["delivers"] ?? checksNode
                throw node.error(
                    "when is the network back? the timeline has no {at: T, outage: end}; allowed: an outage and its end at a moment (e.g. - {at: 1s, outage: refuse} and - {at: 6s, outage: end})"
                )
            }
            delivers.returnsAt = back
            placed.append(.delivers(delivers))
        }
        return placed
    }
}
