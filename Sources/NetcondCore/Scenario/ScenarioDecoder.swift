import Foundation
import Yams

/// Builds a ``Scenario`` from YAML, with every error at `file:line:column` and its key path, as
/// for profiles. The schema is documented in `Scenarios/README.md`; keep the two in step.
public enum ScenarioDecoder {
    static let topKeys = ["name", "description", "profile", "engine", "timeline", "origin", "client", "checks"]

    /// True when a YAML document is a scenario rather than a profile: its top-level mapping has
    /// `checks:` or `client:` (a profile never has either). Unreadable YAML is not a scenario.
    public static func looksLikeScenario(yaml: String) -> Bool {
        Self.topMapping(yaml: yaml).map(Self.hasScenarioKeys) ?? false
    }

    /// True when `path` names a readable scenario file (see ``looksLikeScenario(yaml:)``).
    public static func isScenarioFile(atPath path: String) -> Bool {
        Self.topMapping(atPath: path).map(Self.hasScenarioKeys) ?? false
    }

    /// True when the file at `path` is readable YAML whose top level is a mapping without `checks:`
    /// or `client:` — a profile, or another document that is surely not a scenario. Unreadable or
    /// malformed files are not "surely not": decoding them says what is wrong.
    public static func isSurelyNotScenario(atPath path: String) -> Bool {
        Self.topMapping(atPath: path).map { !Self.hasScenarioKeys($0) } ?? false
    }

    /// The top-level mapping of a YAML document, or nil when it is unreadable or not a mapping.
    private static func topMapping(yaml: String) -> Node.Mapping? {
        guard let root = try? ConfigNode.parse(yaml: yaml, file: ""), case .mapping(let mapping) = root.node else {
            return nil
        }
        return mapping
    }

    private static func topMapping(atPath path: String) -> Node.Mapping? {
        (try? String(contentsOfFile: path, encoding: .utf8)).flatMap(Self.topMapping(yaml:))
    }

    private static func hasScenarioKeys(_ mapping: Node.Mapping) -> Bool {
        mapping.keys.contains { ["checks", "client"].contains($0.scalar?.string) }
    }

    public static func decodeFile(atPath path: String) throws(ConfigError) -> Scenario {
        let yaml = try ProfileDecoder.readFile(path, errorFile: path, errorNode: nil)
        return try self.decode(yaml: yaml, file: path)
    }

    /// Reads every key; a wrong one does not stop the others being read, and all that were wrong
    /// are thrown together (``ConfigError/alsoFound``). A key read with another's value (the
    /// timeline with the profile and origin, the checks with the origin and client) is read when
    /// those were right, so that no error follows from another.
    public static func decode(yaml: String, file: String) throws(ConfigError) -> Scenario {
        let root = try ConfigNode.parse(yaml: yaml, file: file)
        let problems = ConfigProblems(file: file)
        let map = try root.mapping(
            allowedKeys: Self.topKeys, expecting: "a mapping of scenario keys", problems: problems)
        let name = Self.name(map, file: file, problems: problems)
        // Shown on one line by `netcond run` and `netcond test`.
        let description = TerminalText.oneLine(
            problems.attempt { () throws(ConfigError) -> String in
                try map["description"]?.string(expecting: "one line saying what the scenario proves") ?? ""
            } ?? "")
        // A key that may be misspelt as an unknown one counts as unread (nil), not as absent: no
        // default is taken for it and no "missing" claimed, so nothing is blamed on its absence.
        let profile =
            map.mayBeMisspelt("profile")
            ? nil
            : problems.attempt { () throws(ConfigError) in
                let node = try map.required(
                    "profile", meaning: "the conditions: a built-in name, a profile file, or a mapping")
                return try Self.profile(node, scenarioName: name)
            }
        let origin =
            map.mayBeMisspelt("origin")
            ? nil
            : problems.attempt { () throws(ConfigError) in
                try map["origin"].map { node throws(ConfigError) in try Self.origin(node) } ?? OriginContent()
            }
        var timeline: [ScenarioEvent]?
        if let profile, let origin, !map.mayBeMisspelt("timeline") {
            timeline = problems.attempt { () throws(ConfigError) in
                try map["timeline"].map { node throws(ConfigError) in
                    try Self.timeline(node, origin: origin, profile: profile)
                } ?? []
            }
        }
        let client =
            map.mayBeMisspelt("client")
            ? nil
            : problems.attempt { () throws(ConfigError) in
                try map["client"].map { node throws(ConfigError) in try Self.client(node) } ?? ClientSpec()
            }
        let checksNode =
            map.mayBeMisspelt("checks")
            ? nil
            : problems.attempt { () throws(ConfigError) in
                try map.required("checks", meaning: "what to judge: completes, resumes, backs-off")
            }
        var checks: [CheckSpec]?
        if let checksNode, let origin, let client {
            checks = problems.attempt { () throws(ConfigError) in
                try Self.checks(checksNode, origin: origin, client: client)
            }
            if let decoded = checks, let timeline {
                checks = problems.attempt { () throws(ConfigError) in
                    try Self.placeNetworkReturn(decoded, timeline: timeline, checksNode: checksNode)
                }
            }
            problems.attempt { () throws(ConfigError) in
                try Self.checkReferences(origin: origin, client: client, node: map["client"] ?? root)
            }
        } else if let checksNode {
            // What the checks refer to is wrong: their names still show now (a misspelt one), not after the fix.
            problems.attempt { () throws(ConfigError) in
                try checksNode.mapping(
                    allowedKeys: CheckSpec.names, expecting: "a mapping of checks", problems: problems)
            }
        }
        let engine = Self.engine(map, problems: problems)
        try problems.check()
        guard let profile, let origin, let timeline, let client, let checks else {
            preconditionFailure("a scenario key failed to decode without an error")
        }
        try Self.checkAgainstTimeline(checks, profile: profile, timeline: timeline, node: checksNode)
        return Scenario(
            name: name, description: description, file: file, profile: profile, timeline: timeline,
            origin: origin, client: client, checks: checks, engine: engine
        )
    }

    /// `name:`, or the file's base name (which must then be a usable name).
    private static func name(_ map: ConfigMapping, file: String, problems: ConfigProblems) -> String {
        let base = ((file as NSString).lastPathComponent as NSString).deletingPathExtension
        var name = base
        if let node = map["name"] {
            name =
                problems.attempt { () throws(ConfigError) in
                    try node.name(expecting: "a short name", what: "the scenario name", example: "resume-after-dropout")
                } ?? base
        } else if let problem = TerminalText.nameProblem(
            base, what: "the file name, the scenario's name without a name: key,")
        {
            problems.note(
                ConfigError(
                    file: file, message: "\(problem); rename the file or add a name: key (e.g. name: my-scenario)"))
        }
        return name
    }

    /// `engine: proxy|packet`, when given.
    private static func engine(_ map: ConfigMapping, problems: ConfigProblems) -> RunEngine? {
        var engine: RunEngine?
        if let node = map["engine"] {
            engine = problems.attempt { () throws(ConfigError) in
                let text = try node.string(expecting: "proxy or packet")
                guard let value = RunEngine(rawValue: text) else {
                    throw node.error(
                        "'\(text)' is not an engine; allowed: proxy (the default), packet (root: the client's own packets)"
                    )
                }
                return value
            }
        }
        return engine
    }

    // MARK: - Profile

    static func profile(_ node: ConfigNode, scenarioName: String) throws(ConfigError) -> Profile {
        if case .mapping = node.node {
            return try ProfileDecoder().decode(node: node, defaultName: scenarioName)
        }
        let text = try node.string(expecting: "a built-in profile name, a profile file, or a mapping")
        if ProfileCatalog.looksLikePath(text) {
            let directory = (node.file as NSString).deletingLastPathComponent
            let path = text.hasPrefix("/") ? text : (directory as NSString).appendingPathComponent(text)
            let yaml = try ProfileDecoder.readFile(path, errorFile: node.file, errorNode: node)
            return try ProfileDecoder().decode(yaml: yaml, file: path)
        }
        guard let profile = ProfileCatalog.builtin(named: text) else {
            throw node.error(
                Suggestion.unknown("profile", text, among: ProfileCatalog.knownNames, listedAs: "built-in profiles")
                    + "; or a path to a .yaml file relative to this file, or a mapping"
            )
        }
        return profile
    }

    // MARK: - Origin

    static let originFaultActions = ["cut_after", "status", "hang", "delay", "drop_response"]

    private static func origin(_ node: ConfigNode) throws(ConfigError) -> OriginContent {
        let map = try node.mapping(allowedKeys: ["files", "api", "faults"])
        var content = OriginContent()
        if let filesNode = map["files"] {
            for (name, child) in try filesNode.entries(
                expecting: "a mapping of file names to {size, seed} (e.g. big.bin: {size: 2MB, seed: 7})")
            {
                guard name.count <= 100,
                    name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }),
                    name != ".", name != ".."
                else {
                    throw child.error(
                        "file name '\(name)' is not allowed; allowed: letters, digits, '.', '_', '-' (e.g. big.bin)")
                }
                let spec = try child.mapping(allowedKeys: ["size", "seed"], expecting: "{size: 2MB, seed: 7}")
                let sizeNode = try spec.required("size", meaning: "how many bytes the file has, e.g. 2MB")
                let size = try sizeNode.unit(ByteCount.parse)
                guard size.bytes >= 1, size.bytes <= 4 << 30 else {
                    throw sizeNode.error("size \(sizeNode.text) is out of range; allowed: 1B…4GB")
                }
                let seed =
                    try spec["seed"].map { node throws(ConfigError) in
                        try node.integer(in: 0...Int(Int32.max), meaning: "a seed")
                    } ?? 0
                content.files.append(OriginFile(name: name, size: size, seed: UInt64(seed)))
            }
        }
        if let apiNode = map["api"] {
            for (name, child) in try apiNode.entries(
                expecting: "a mapping of endpoint names to {method, json} (e.g. orders: {method: POST})")
            {
                guard name.count <= 100,
                    name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }),
                    name != ".", name != ".."
                else {
                    throw child.error(
                        "endpoint name '\(name)' is not allowed; allowed: letters, digits, '.', '_', '-' (e.g. orders)")
                }
                let spec = try child.mapping(
                    allowedKeys: ["method", "json"], expecting: "{method: POST} or {json: '{\"a\": 1}'}")
                var api = OriginAPI(name: name)
                if let method = spec["method"] { api.method = try method.choice(OriginAPI.Method.self) }
                if let json = spec["json"] {
                    guard api.method == .get else {
                        throw json.error("json is what a GET answers; allowed: json with method: GET")
                    }
                    let text = try json.string(
                        expecting: "the JSON a GET answers, as a string (e.g. '{\"name\": \"Ada\"}')")
                    guard
                        (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil
                    else {
                        throw json.error(
                            "'\(text.prefix(40))' is not JSON; allowed: a JSON text, quoted (e.g. '{\"name\": \"Ada\"}')"
                        )
                    }
                    api.json = text
                }
                content.api.append(api)
            }
        }
        if let faultsNode = map["faults"] {
            content.faults = try HTTPFault.decodeList(faultsNode, context: FaultContext(end: .origin, origin: content))
        }
        return content
    }

    // MARK: - Timeline

    static let timelineActions = [
        "profile", "handover", "outage", "stall", "fault", "remove_fault", "faults", "captive", "cut",
    ]

    static let timelineTriggers = ["at", "after_request", "after_bytes"]

    private static func timeline(_ node: ConfigNode, origin: OriginContent, profile: Profile) throws(ConfigError)
        -> [ScenarioEvent]
    {
        let example = "{at: 5s, outage: refuse}"
        var events: [ScenarioEvent] = []
        // Names `remove_fault` may use: the profile's faults and those added before it in the file.
        var faultNames = Set(profile.faults.compactMap(\.name))
        // Routes a `route:` event may name: the profile's and those of profiles switched to before it.
        var routeNames = profile.routes.map(\.name)
        for element in try node.list() {
            let map = try element.mapping(
                allowedKeys: Self.timelineTriggers + ["of", "route"] + Self.timelineActions,
                expecting: "an event (e.g. \(example))")
            let trigger = try Self.timelineTrigger(map, origin: origin)
            if let routeNode = map["route"] {
                let action = try Self.routeEvent(map, routeNode, routeNames: routeNames)
                events.append(ScenarioEvent(trigger: trigger, action: action))
                continue
            }
            let (kind, value) = try map.single(of: Self.timelineActions, thing: "event", example: example)
            let action: ScenarioAction
            switch kind {
            case "profile":
                let switched = try Self.profile(value, scenarioName: "timeline")
                // A switch replaces every fault in force with the new profile's.
                faultNames = Set(switched.faults.compactMap(\.name))
                routeNames += switched.routes.map(\.name)
                action = .switchProfile(switched)
            case "handover":
                action = try Self.handover(value)
                faultNames = Set((action.profileSwitchedTo?.faults ?? []).compactMap(\.name))
                routeNames += (action.profileSwitchedTo?.routes ?? []).map(\.name)
            case "outage":
                let word = try value.choice(OutageBehaviour.allCases.map(\.rawValue) + ["end"])
                action = .outage(OutageBehaviour(rawValue: word))
            case "stall":
                let word = try value.choice(StallDirection.allCases.map(\.rawValue) + ["end"])
                action = .stall(StallDirection(rawValue: word))
            case "fault":
                let fault = try HTTPFault(node: value, context: FaultContext(end: .proxy, origin: origin))
                if let name = fault.name { faultNames.insert(name) }
                action = .addFault(fault)
            case "remove_fault":
                let name = try value.string(expecting: "the name of a fault (its name: key)")
                guard faultNames.contains(name) else {
                    throw value.error(
                        "no fault named '\(name)' in the profile or earlier in the timeline; allowed: "
                            + (faultNames.isEmpty
                                ? "give a fault a name: (e.g. {at: 1s, fault: {name: flaky, status: 503}})"
                                : faultNames.sorted().joined(separator: ", ")))
                }
                action = .removeFault(named: name)
            case "faults":
                _ = try value.choice(["clear"])
                faultNames = []
                action = .clearFaults
            case "cut":
                action = .cut(CutMode(rawValue: try value.choice(CutMode.allCases.map(\.rawValue)))!)
            default:
                let word = try value.choice(["open", "close"])
                action = .captive(open: word == "open")
            }
            events.append(ScenarioEvent(trigger: trigger, action: action))
        }
        return events
    }

    /// An event's one trigger: `at`, `after_request` (with an optional `of`) or `after_bytes`.
    private static func timelineTrigger(_ map: ConfigMapping, origin: OriginContent) throws(ConfigError)
        -> ScenarioTrigger
    {
        let present = Self.timelineTriggers.filter { map[$0] != nil }
        // No trigger at all: `required` says 'at' is missing, as for any missing key.
        let first = present.first ?? "at"
        if present.count > 1, let second = map[present[1]] {
            throw second.error("\(present[0]) and \(present[1]) exclude each other; allowed: one trigger per event")
        }
        let triggerNode = try map.required(
            first, meaning: "when, from the client's start (e.g. 5s); or after_request: N, after_bytes: SIZE")
        let trigger: ScenarioTrigger
        switch first {
        case "at":
            trigger = .at(
                try triggerNode.span(in: .zero...(.seconds(Int64(3600))), allowed: "0s…1h", example: "at: 5s"))
        case "after_request":
            let count = try triggerNode.integer(in: 1...1_000_000, meaning: "how many finished responses")
            var target: OriginTarget?
            if let ofNode = map["of"] {
                let path = try ofNode.string(expecting: "a file or endpoint path (e.g. /files/big.bin)")
                if let name = OriginFile.name(inPath: path), origin.file(named: name) != nil {
                    target = .file(name)
                } else if let name = OriginAPI.name(inPath: path), origin.api(named: name) != nil {
                    target = .api(name)
                } else {
                    let known = origin.files.map(\.path) + origin.api.map(\.path)
                    throw ofNode.error(
                        "'\(path)' is not a file or endpoint of this scenario; allowed: "
                            + (known.isEmpty
                                ? "define one under origin.files or origin.api" : known.joined(separator: ", ")))
                }
            }
            trigger = .afterRequests(count, of: target)
        default:
            let bytes = try triggerNode.unit(ByteCount.parse)
            guard bytes.bytes >= 1 else { throw triggerNode.error("after_bytes must be at least 1B") }
            trigger = .afterBytes(bytes)
        }
        if let ofNode = map["of"], first != "after_request" {
            throw ofNode.error("of goes with after_request; allowed: {after_request: 1, of: /files/big.bin, ...}")
        }
        return trigger
    }

    // MARK: - Client

    private static func client(_ node: ConfigNode) throws(ConfigError) -> ClientSpec {
        let map = try node.mapping(allowedKeys: ["command", "url", "output", "env", "directory", "deadline"])
        var client = ClientSpec()
        if let command = map["command"] {
            if case .sequence = command.node {
                var argv: [String] = []
                for element in try command.list() { argv.append(try element.string(expecting: "an argument")) }
                guard !argv.isEmpty else {
                    throw command.error("the command is empty; allowed: a list of arguments or one shell line")
                }
                client.command = argv
            } else {
                client.command = [
                    "/bin/sh", "-c", try command.string(expecting: "a shell line or a list of arguments"),
                ]
            }
        }
        if let url = map["url"] {
            let text = try url.string(expecting: "a path on the origin (/files/big.bin) or a URL")
            guard text.hasPrefix("/") || text.hasPrefix("http://") || text.hasPrefix("https://") else {
                throw url.error("'\(text)' is neither a path nor a URL; allowed: /files/NAME, /status/503, http://…")
            }
            client.url = text
        }
        if let output = map["output"] {
            let text = try output.text(expecting: "a file name")
            guard !text.contains("/"), text != ".", text != ".." else {
                throw output.error(
                    "'\(text)' is not a plain file name; allowed: a name inside the run's working directory (e.g. big.bin)"
                )
            }
            client.output = text
        }
        if let env = map["env"] {
            for (name, value) in try env.entries(expecting: "a mapping of variable names to values") {
                guard !name.contains("=") else {
                    throw value.error("'\(name)' is not a variable name; allowed: a name without '='")
                }
                client.environment[name] = value.isNull ? "" : try value.string(expecting: "a text value")
            }
        }
        if let directoryNode = map["directory"] {
            let text = try directoryNode.string(expecting: "a folder (relative to this file, or absolute)")
            let base = (directoryNode.file as NSString).deletingLastPathComponent
            var path = text.hasPrefix("/") ? text : (base as NSString).appendingPathComponent(text)
            if !path.hasPrefix("/") {
                path = (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
            }
            path = (path as NSString).standardizingPath
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw directoryNode.error(
                    "no folder '\(path)'; allowed: an existing folder, relative to this file or absolute (default: the run's fresh NETCOND_WORKDIR)"
                )
            }
            client.directory = path
        }
        if let deadline = map["deadline"] {
            client.deadline = try deadline.span(
                in: .milliseconds(100)...(.seconds(Int64(3600))), allowed: "100ms…1h", example: "deadline: 30s")
        }
        return client
    }

    /// The file `NETCOND_URL` names, when it is one of the origin's (`/files/NAME`).
    static func urlFile(_ client: ClientSpec) -> String? {
        client.originPath.flatMap(OriginFile.name(inPath:))
    }

    static func urlAPI(_ client: ClientSpec) -> String? {
        client.originPath.flatMap(OriginAPI.name(inPath:))
    }

    private static func checkReferences(origin: OriginContent, client: ClientSpec, node: ConfigNode) throws(ConfigError)
    {
        if let file = Self.urlFile(client), origin.file(named: file) == nil {
            throw node.error(
                "url names \(OriginFile.path(of: file)), which origin.files does not define; allowed: "
                    + (origin.files.isEmpty
                        ? "define it under origin.files" : origin.files.map(\.path).joined(separator: ", ")))
        }
        if let api = Self.urlAPI(client), origin.api(named: api) == nil {
            throw node.error(
                "url names \(OriginAPI.path(of: api)), which origin.api does not define; allowed: "
                    + (origin.api.isEmpty
                        ? "define it under origin.api" : origin.api.map(\.path).joined(separator: ", ")))
        }
    }
}
