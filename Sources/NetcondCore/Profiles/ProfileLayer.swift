import Foundation

// MARK: - One file's keys

/// A value read from a file, and the node it came from (for errors found after merging).
struct Located<Value> {
    var value: Value
    var node: ConfigNode
}

/// The keys one file sets, validated one by one; nothing inherited yet.
struct ProfileLayer {
    static let topKeys = [
        "name", "description", "source", "extends", "tcp", "mss", "dns_delay", "connect_delay", "link", "up", "down",
        "schedule", "stalls", "faults", "firewall", "connect_hold", "dns_fail", "captive_portal", "routes",
        "radio", "ipv6_only",
    ]

    var root: ConfigNode
    var name: Located<String>?
    var description: Located<String>?
    var source: Located<String>?
    var extends: Located<String>?
    var tcp: Located<CongestionControl>?
    var mss: Located<ByteCount>?
    var dnsDelay: Located<Span>?
    var connectDelay: Located<Span>?
    var link = DirectionLayer()
    var up = DirectionLayer()
    var down = DirectionLayer()
    var schedule: ScheduleLayer?
    var stalls: StallLayer?
    var faults: [HTTPFault]?
    var firewall: (allowPorts: [Int], otherwise: FirewallAction)?
    var connectHold: (hold: Span, first: Int)?
    var dnsFail: [String]?
    var captivePortal: CaptivePortalSpec?
    var routes: [RouteLayer]?
    var radio: Located<RadioSpec>?
    /// `ipv6_only:` as written: nil inside when it says `false`.
    var ipv6Only: Located<IPv6OnlySpec?>?

    /// Reads every key; a wrong one does not stop the others being read, and all that were wrong
    /// are thrown together (``ConfigError/alsoFound``).
    /// With `problems`, the errors are noted there for the caller to throw with its own.
    /// `keys`: the keys allowed (a route's are fewer), with `hints` for keys put in the wrong place.
    init(
        root: ConfigNode, isBuiltin: Bool, files: ProfileDecoder.FileReferences,
        problems external: ConfigProblems? = nil, keys: [String] = Self.topKeys,
        hints extraHints: [String: String] = [:],
        expecting: String = "a mapping of profile keys"
    ) throws(ConfigError) {
        self.root = root
        var hints: [String: String] = extraHints
        for key in DirectionLayer.keys {
            hints[key] = "'\(key)' belongs under down:, up: or link: (both directions)"
        }
        let problems = external ?? ConfigProblems(file: root.file)
        let map = try root.mapping(allowedKeys: keys, expecting: expecting, hints: hints, problems: problems)
        self.readIdentity(map, isBuiltin: isBuiltin, problems: problems)
        if let node = map["tcp"] {
            self.tcp =
                problems.attempt { () throws(ConfigError) in
                    let word = try node.choice(CongestionControl.allCases.map(\.rawValue))
                    return CongestionControl(rawValue: word).map { Located(value: $0, node: node) }
                } ?? nil
        }
        if let node = map["mss"] {
            self.mss = problems.attempt { () throws(ConfigError) in
                let value = try node.unit(ByteCount.parse)
                guard value.bytes >= 64, value.bytes <= 65_535 else {
                    throw node.error(
                        "mss \(node.text) is out of range; allowed: 64B…65535B (e.g. 1460B, the Ethernet size)"
                    )
                }
                return Located(value: value, node: node)
            }
        }
        self.dnsDelay =
            problems.attempt { () throws(ConfigError) in try Self.delay(map["dns_delay"], example: "dns_delay: 1.5s") }
            ?? nil
        self.connectDelay =
            problems.attempt { () throws(ConfigError) in
                try Self.delay(map["connect_delay"], example: "connect_delay: 2s")
            } ?? nil
        if let node = map["link"] { self.link = DirectionLayer(node: node, files: files, problems: problems) }
        if let node = map["up"] { self.up = DirectionLayer(node: node, files: files, problems: problems) }
        if let node = map["down"] { self.down = DirectionLayer(node: node, files: files, problems: problems) }
        if let node = map["schedule"] {
            self.schedule = problems.attempt { () throws(ConfigError) in
                try ScheduleLayer(node: node, file: root.file, files: files)
            }
        }
        if let node = map["stalls"] {
            self.stalls = problems.attempt { () throws(ConfigError) in try StallLayer(node: node) }
        }
        self.readRules(map, files: files, problems: problems)
        if external == nil { try problems.check() }
    }

    /// `name`, `description`, `source` (each required of a built-in) and `extends`.
    private mutating func readIdentity(_ map: ConfigMapping, isBuiltin: Bool, problems: ConfigProblems) {
        func text(_ key: String) -> Located<String>? {
            guard let node = map[key] else { return nil }
            return problems.attempt { () throws(ConfigError) in
                Located(value: try node.string(expecting: "a text"), node: node)
            }
        }
        if let node = map["name"] {
            self.name = problems.attempt { () throws(ConfigError) in
                Located(
                    value: try node.name(expecting: "a text", what: "the profile name", example: "my-edge"), node: node)
            }
        }
        self.description = text("description")
        self.source = text("source")
        self.extends = text("extends")
        if isBuiltin {
            let required = [
                ("name", "required for built-in profiles: the name users type"),
                ("description", "required for built-in profiles: one line saying what the profile models"),
                ("source", "required for built-in profiles: where the numbers come from"),
            ]
            for (key, meaning) in required where !map.mayBeMisspelt(key) {
                _ = problems.attempt { () throws(ConfigError) in try map.required(key, meaning: meaning) }
            }
        }
        if let name = self.name, name.value.trimmingCharacters(in: .whitespaces).isEmpty {
            problems.note(name.node.error("the name is empty; write a short word (e.g. my-edge) or leave the key out"))
        }
    }

    /// What happens to a request or a connection beyond the link: faults, the firewall, held
    /// connects, names that do not resolve, the captive portal.
    private mutating func readRules(
        _ map: ConfigMapping, files: ProfileDecoder.FileReferences, problems: ConfigProblems
    ) {
        if let node = map["faults"] {
            self.faults = problems.attempt { () throws(ConfigError) in try HTTPFault.decodeList(node, context: .proxy) }
        }
        if let node = map["firewall"] {
            self.firewall = problems.attempt { () throws(ConfigError) in try SetupRules.firewall(node) }
        }
        if let node = map["connect_hold"] {
            self.connectHold = problems.attempt { () throws(ConfigError) in try SetupRules.connectHold(node) }
        }
        if let node = map["dns_fail"] {
            self.dnsFail = problems.attempt { () throws(ConfigError) in try SetupRules.dnsFail(node) }
        }
        if let node = map["captive_portal"] {
            self.captivePortal = problems.attempt { () throws(ConfigError) in try CaptivePortalSpec(node: node) }
        }
        if let node = map["routes"] {
            self.routes = RouteLayer.decodeList(node, files: files, problems: problems)
        }
        if let node = map["radio"] {
            self.radio = problems.attempt { () throws(ConfigError) in
                Located(value: try RadioSpec(node: node), node: node)
            }
        }
        if let node = map["ipv6_only"] {
            self.ipv6Only = problems.attempt { () throws(ConfigError) in
                Located(value: try IPv6OnlySpec.decode(node), node: node)
            }
        }
    }

    private static func delay(_ node: ConfigNode?, example: String) throws(ConfigError) -> Located<Span>? {
        guard let node else { return nil }
        return Located(value: try node.setupDelay(example: example), node: node)
    }

    /// The name when the file does not give one: its base name without extension.
    func defaultName(file: String) -> String {
        if let name = self.name { return name.value }
        let base = (file as NSString).lastPathComponent
        let stem = (base as NSString).deletingPathExtension
        return stem.isEmpty ? base : stem
    }
}
