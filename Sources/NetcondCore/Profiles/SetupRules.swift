/// How new connections are treated before a byte moves: a firewall that lets only some ports
/// out, a desktop firewall holding the first connections while it asks for approval, and names
/// that do not resolve.
///
/// ```yaml
/// firewall: {allow_ports: [80, 443], otherwise: blackhole}
/// connect_hold: {for: 60s, first: 1}        # or connect_hold: 60s
/// dns_fail: [api.example.com, "*.tracker.example"]
/// ```
public struct SetupRules: Sendable, Equatable {
    /// Ports connections may go to (nil: any).
    public var allowPorts: [Int]?
    /// What happens to a connection to another port.
    public var otherwise: FirewallAction
    /// How long the first `holdFirst` connection attempts wait before their handshake starts.
    public var hold: Span
    public var holdFirst: Int
    /// Host name globs that do not resolve (NXDOMAIN-style), after the DNS delay.
    public var dnsFail: [String]

    public init(
        allowPorts: [Int]? = nil,
        otherwise: FirewallAction = .refuse,
        hold: Span = .zero,
        holdFirst: Int = 1,
        dnsFail: [String] = []
    ) {
        self.allowPorts = allowPorts
        self.otherwise = otherwise
        self.hold = hold
        self.holdFirst = holdFirst
        self.dnsFail = dnsFail
    }

    public var isEmpty: Bool { self.allowPorts == nil && self.hold == .zero && self.dnsFail.isEmpty }

    /// Whether a lookup of `host` fails (a `dns_fail` glob matches it).
    public func nameFails(_ host: String) -> Bool {
        let host = host.lowercased()
        return self.dnsFail.contains { Glob.matches($0.lowercased(), host) }
    }

    /// What the set-up of the `index`-th connection attempt of the run (0-based) to `host:port` meets.
    public func verdict(host: String, port: Int, isName: Bool, index: Int) -> SetupVerdict {
        if isName, self.nameFails(host) {
            return .nameFails
        }
        if let allowed = self.allowPorts, !allowed.contains(port) {
            return self.otherwise == .refuse ? .refused : .blackholed
        }
        return .proceed(hold: index < self.holdFirst ? self.hold : .zero)
    }
}

public enum FirewallAction: String, Sendable, Equatable, CaseIterable {
    /// Answered with a reset one round trip later (a REJECT rule).
    case refuse
    /// Silently dropped: the handshake is retried until the client gives up (a DROP rule).
    case blackhole
}

public enum SetupVerdict: Sendable, Equatable {
    case proceed(hold: Span)
    case refused
    case blackholed
    case nameFails
}

// MARK: - Decoding

extension SetupRules {
    /// `firewall: {allow_ports: [80, 443], otherwise: refuse}`.
    static func firewall(_ node: ConfigNode) throws(ConfigError) -> (allowPorts: [Int], otherwise: FirewallAction) {
        let map = try node.mapping(
            allowedKeys: ["allow_ports", "otherwise"],
            expecting: "a mapping {allow_ports: [80, 443], otherwise: refuse}"
        )
        let portsNode = try map.required("allow_ports", meaning: "the ports connections may go to, e.g. [80, 443]")
        var ports: [Int] = []
        for element in try portsNode.list() {
            let text = try element.numberText(expecting: "a port number")
            guard let port = Int(text), (1...65535).contains(port) else {
                throw element.error("'\(text)' is not a port; allowed: 1…65535")
            }
            ports.append(port)
        }
        var otherwise = FirewallAction.refuse
        if let node = map["otherwise"] {
            otherwise = try node.choice(FirewallAction.self)
        }
        return (ports, otherwise)
    }

    /// `connect_hold: 60s` or `{for: 60s, first: 3}`.
    static func connectHold(_ node: ConfigNode) throws(ConfigError) -> (hold: Span, first: Int) {
        func duration(_ node: ConfigNode) throws(ConfigError) -> Span {
            try node.span(
                in: .nanoseconds(1)...(.seconds(Int64(3600))), allowed: "above 0 up to 1h", example: "connect_hold: 60s"
            )
        }
        if node.node.mapping == nil {
            return (try duration(node), 1)
        }
        let map = try node.mapping(
            allowedKeys: ["for", "first"], expecting: "a duration (60s) or {for: 60s, first: 3}")
        let hold = try duration(try map.required("for", meaning: "how long each held connection waits, e.g. 60s"))
        var first = 1
        if let node = map["first"] {
            let text = try node.numberText(expecting: "a count")
            guard let count = Int(text), count >= 1 else {
                throw node.error("first '\(text)' is not a count; allowed: 1 or more (the first N connections)")
            }
            first = count
        }
        return (hold, first)
    }

    /// `dns_fail: [api.example.com, "*.tracker.example"]`.
    static func dnsFail(_ node: ConfigNode) throws(ConfigError) -> [String] {
        var names: [String] = []
        for element in try node.list() {
            let name = try element.string(expecting: "a host name or glob")
            guard !name.isEmpty, !name.contains(" "), !name.contains("/"), !name.contains(":") else {
                throw element.error(
                    "'\(name)' is not a host name; allowed: a name or glob such as api.example.com or *.example.com")
            }
            names.append(name)
        }
        return names
    }
}
