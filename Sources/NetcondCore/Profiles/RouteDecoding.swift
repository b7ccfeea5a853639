/// One `routes:` entry as a file writes it: `match:`, an optional `name:` and `outage:`, and the
/// keys of a profile that belong to one destination, read by ``ProfileLayer`` as a profile's are.
///
/// ```yaml
/// routes:
///   - match: {host: "cdn.netcond.test"}          # host globs; address: CIDR; port: 443 or 8000-8100; protocol
///     link: {latency: 300ms, bandwidth: 2Mbit}
///   - match: {host: "ads.netcond.test"}
///     outage: blackhole
///   - match: {host: "api.netcond.test"}
///     faults: [{status: 503, retry_after: 2s, first: 2}]
/// ```
struct RouteLayer {
    static let ownKeys = ["name", "match", "outage"]
    static let bodyKeys = [
        "link", "up", "down", "dns_delay", "connect_delay", "schedule", "stalls", "faults", "firewall", "connect_hold",
        "dns_fail",
    ]
    /// Why a profile key cannot be a route's.
    static let refused: [String: String] = [
        "captive_portal":
            "a captive portal is the access network's (the hotel's Wi-Fi stands in front of every destination); write captive_portal: at the profile's top level",
        "tcp": "the TCP sender is the client's, one for every destination; write tcp: at the profile's top level",
        "mss": "the segment size is the client's, one for every destination; write mss: at the profile's top level",
        "extends": "a route does not extend a profile; give its link keys here, or a schedule phase's use: PROFILE",
        "routes": "routes do not nest; list every route under the profile's own routes:",
        "description": "describe the profile at its top level; a route has a name:",
        "source": "say where the numbers come from at the profile's top level",
        "ipv6_only":
            "an IPv6-only network is the device's access network, in front of every destination; write ipv6_only: at the profile's top level",
        "radio":
            "the radio is the device's, on the access link every destination shares; write radio: at the profile's top level",
    ]

    var name: String?
    var match: RouteMatch
    var outage: OutageBehaviour?
    var body: ProfileLayer
    var node: ConfigNode

    /// Every entry of a `routes:` list; a wrong one is noted in `problems` and left out.
    static func decodeList(_ node: ConfigNode, files: ProfileDecoder.FileReferences, problems: ConfigProblems)
        -> [RouteLayer]
    {
        guard let elements = problems.attempt({ () throws(ConfigError) in try node.list() }) else { return [] }
        var routes: [RouteLayer] = []
        for element in elements {
            if let route = RouteLayer(element, files: files, problems: problems) { routes.append(route) }
        }
        if routes.count > Self.maximumRoutes {
            problems.note(
                node.error("\(routes.count) routes; allowed: up to \(Self.maximumRoutes) (one per destination)"))
        }
        return routes
    }

    static let maximumRoutes = 100_000

    private init?(_ node: ConfigNode, files: ProfileDecoder.FileReferences, problems: ConfigProblems) {
        self.node = node
        let body = problems.attempt { () throws(ConfigError) in
            try ProfileLayer(
                root: node, isBuiltin: false, files: files, problems: problems, keys: Self.ownKeys + Self.bodyKeys,
                hints: Self.refused,
                expecting:
                    "a route: a mapping with match: {host: …} and the destination's keys (link:, outage:, faults: …)"
            )
        }
        guard let body else { return nil }
        self.body = body
        self.name = body.name?.value
        let own = (try? node.entries(expecting: "a route")) ?? []
        let matchNode = own.first { $0.key == "match" }?.value
        guard let matchNode else {
            problems.note(
                node.error(
                    "a route needs match: (which connections take it), e.g. match: {host: \"cdn.example.com\"}"))
            return nil
        }
        guard let match = problems.attempt({ () throws(ConfigError) in try Self.match(matchNode) }) else { return nil }
        self.match = match
        if match.hosts.isEmpty, let delay = own.first(where: { $0.key == "dns_delay" }) {
            problems.note(
                delay.value.error(
                    "dns_delay: this route matches no host, and a look-up meets the DNS delay of the route whose host: names the name looked up; add host: to match:, or write dns_delay: at the profile's top level"
                ))
        }
        if let outage = own.first(where: { $0.key == "outage" })?.value {
            self.outage = problems.attempt { () throws(ConfigError) in try outage.choice(OutageBehaviour.self) }
        }
    }

    // MARK: - match:

    static func match(_ node: ConfigNode) throws(ConfigError) -> RouteMatch {
        let map = try node.mapping(
            allowedKeys: ["host", "address", "port", "protocol"],
            expecting: "a mapping such as {host: \"cdn.example.com\"} or {address: 10.0.0.0/8, port: 443}")
        var match = RouteMatch()
        if let hosts = map["host"] {
            for element in try Self.oneOrMany(hosts) {
                let host = try element.string(expecting: "a host name or glob")
                guard !host.isEmpty, !host.contains(" "), !host.contains("/"), !host.contains(":") else {
                    throw element.error(
                        "'\(host)' is not a host name; allowed: a name or glob such as cdn.example.com or *.example.com (an address goes under address:)"
                    )
                }
                match.hosts.append(host.lowercased())
            }
        }
        if let addresses = map["address"] {
            for element in try Self.oneOrMany(addresses) {
                let text = try element.string(expecting: "an address block")
                guard let block = AddressBlock(text) else {
                    throw element.error(
                        "'\(text)' is not an address block; allowed: an IPv4 or IPv6 address with an optional prefix length, e.g. 127.0.0.2/32, 10.0.0.0/8, ::1/128"
                    )
                }
                match.addresses.append(block)
            }
        }
        if let ports = map["port"] {
            for element in try Self.oneOrMany(ports) { match.ports.append(try Self.portRange(element)) }
        }
        if let transport = map["protocol"] { match.transport = try transport.choice(RouteMatch.Transport.self) }
        return match
    }

    /// A value or a list of them.
    private static func oneOrMany(_ node: ConfigNode) throws(ConfigError) -> [ConfigNode] {
        if node.node.sequence != nil {
            let list = try node.list()
            guard !list.isEmpty else {
                throw node.error("the list is empty; give at least one value, or leave the key out")
            }
            return list
        }
        return [node]
    }

    /// `443` or `8000-8100`.
    private static func portRange(_ node: ConfigNode) throws(ConfigError) -> ClosedRange<Int> {
        let text = try node.string(expecting: "a port or a range of ports")
        let bounds = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map {
            Int($0.trimmingCharacters(in: .whitespaces))
        }
        guard bounds.allSatisfy({ $0 != nil && (1...65535).contains($0!) }), let low = bounds.first!,
            let high = bounds.last!, low <= high
        else {
            throw node.error("'\(text)' is not a port or a range of ports; allowed: 1…65535, e.g. 443 or 8000-8100")
        }
        return low...high
    }

    /// The route's name when it gives none: its first host, else its match.
    var displayName: String {
        self.name ?? self.match.hosts.first ?? self.match.description
    }
}
