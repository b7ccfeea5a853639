import Foundation
import Yams

/// Builds a `Profile` from a YAML document: schema, units, `extends`, `link:` defaults and
/// validation, with every error pointing at `file:line:column` and the key path.
///
/// How a profile is put together (later layers override earlier ones, key by key):
///
/// ```
///   extends target (recursively, fully merged)     e.g. built-in 3g
///     └─ this file's `link:`      → both directions
///          └─ this file's `up:` / `down:`  → one direction each
/// ```
///
/// `name`, `description` and `source` describe one file and are not inherited. The schema is
/// documented in `Profiles/README.md`; keep the two in step.
public struct ProfileDecoder {
    /// Built-in profiles as YAML, by name; `extends: NAME` looks here.
    public var builtins: [(name: String, yaml: String)]
    /// Whether `extends:` and a phase's `use:` may name files (the only keys that read one).
    public var fileReferences: FileReferences

    /// What a path in `extends:` or `use:` does.
    public enum FileReferences: Sendable, Equatable {
        /// The file is read (relative to the file that names it): profiles on the user's own disk.
        case allowed
        /// Nothing is read; a path is an error whose message ends with `reason` (what to do instead).
        /// For text that came from elsewhere (the control API), which must name built-ins only.
        case refused(reason: String)
    }

    public init(
        builtins: [(name: String, yaml: String)] = BuiltinProfiles.all,
        fileReferences: FileReferences = .allowed
    ) {
        self.builtins = builtins
        self.fileReferences = fileReferences
    }

    /// Whether a profile may read files it names (a trace): not a built-in, not text from elsewhere.
    func fileAccess(isBuiltin: Bool) -> FileReferences {
        isBuiltin ? .refused(reason: "a built-in profile names no file") : self.fileReferences
    }

    /// Decodes a profile file on disk; `path` appears in errors as given.
    public func decodeFile(atPath path: String) throws(ConfigError) -> Profile {
        let yaml = try Self.readFile(path, errorFile: path, errorNode: nil)
        return try self.decode(yaml: yaml, file: path)
    }

    /// Decodes a user profile from text. `file` names it in errors, gives the default name (its base
    /// name) and is the directory that a relative `extends` path starts from.
    public func decode(yaml: String, file: String) throws(ConfigError) -> Profile {
        let identity = "file:" + Self.absolutePath(file)
        return try self.decode(yaml: yaml, file: file, isBuiltin: false, chain: [identity])
    }

    /// Decodes one of `builtins` by name (`edge`). Built-ins must say `name`, `description` and
    /// `source`, and may extend only other built-ins.
    public func decodeBuiltin(named name: String) throws(ConfigError) -> Profile {
        guard let entry = self.builtins.first(where: { $0.name == name }) else {
            throw ConfigError(
                file: "",
                message: Suggestion.unknown(
                    "profile", name, among: self.builtins.map(\.name), listedAs: "built-in profiles"
                )
            )
        }
        return try self.decode(
            yaml: entry.yaml, file: Self.builtinFile(name), isBuiltin: true, chain: ["builtin:" + name]
        )
    }

    /// Where a built-in lives in the repository (used in its error messages).
    static func builtinFile(_ name: String) -> String { "Profiles/\(name).yaml" }

    // MARK: - Layers

    /// Decodes a profile written inline in another file (a scenario's `profile:` mapping): errors
    /// keep that file's positions and key paths; a relative `extends` starts from its directory.
    func decode(node: ConfigNode, defaultName: String) throws(ConfigError) -> Profile {
        let identity = "inline:" + Self.absolutePath(node.file) + ":\(node.line)"
        return try self.decode(
            root: node, file: node.file, isBuiltin: false, chain: [identity], defaultName: defaultName)
    }

    private func decode(yaml: String, file: String, isBuiltin: Bool, chain: [String]) throws(ConfigError) -> Profile {
        let root = try ConfigNode.parse(yaml: yaml, file: file)
        return try self.decode(root: root, file: file, isBuiltin: isBuiltin, chain: chain, defaultName: nil)
    }

    private func decode(
        root: ConfigNode, file: String, isBuiltin: Bool, chain: [String], defaultName: String?
    ) throws(ConfigError) -> Profile {
        // The file's own errors and those of what it extends (a misspelt target) show together.
        let problems = ConfigProblems(file: file)
        let layer = try ProfileLayer(
            root: root, isBuiltin: isBuiltin, files: self.fileAccess(isBuiltin: isBuiltin), problems: problems)
        let merged = problems.attempt { () throws(ConfigError) in
            try self.effectiveLayer(layer, file: file, isBuiltin: isBuiltin, chain: chain)
        }
        try problems.check()
        guard let merged else { preconditionFailure("extends failed without an error") }
        let name = layer.name?.value ?? defaultName ?? layer.defaultName(file: file)
        if layer.name == nil && defaultName == nil,
            let problem = TerminalText.nameProblem(name, what: "the file name, the profile's name without a name: key,")
        {
            throw ConfigError(
                file: file, message: "\(problem); rename the file or add a name: key (e.g. name: my-edge)")
        }
        return try merged.resolve(name: name, own: layer) { use, declaringFile throws(ConfigError) in
            try self.conditions(of: use, declaredIn: declaringFile, isBuiltin: isBuiltin, chain: chain)
        }
    }

    /// A profile named by `extends:` or a phase's `use:`: its identity (for cycle checks), text,
    /// file and kind. Nil for `none`.
    private struct ProfileSource {
        var identity: String
        var yaml: String
        var file: String
        var isBuiltin: Bool
    }

    private func locate(
        _ reference: Located<String>,
        from file: String,
        isBuiltin: Bool,
        chain: [String],
        key: String
    ) throws(ConfigError) -> ProfileSource? {
        let target = reference.value
        if ProfileCatalog.looksLikePath(target) {
            guard !isBuiltin else {
                throw reference.node.error("a built-in profile may only \(key) another built-in, not a file")
            }
            if case .refused(let reason) = self.fileReferences {
                throw reference.node.error("'\(target)' is a path; \(reason)")
            }
            let directory = (file as NSString).deletingLastPathComponent
            let path = target.hasPrefix("/") ? target : (directory as NSString).appendingPathComponent(target)
            let identity = "file:" + Self.absolutePath(path)
            let yaml =
                chain.contains(identity) ? "" : try Self.readFile(path, errorFile: file, errorNode: reference.node)
            return ProfileSource(identity: identity, yaml: yaml, file: path, isBuiltin: false)
        } else if let entry = self.builtins.first(where: { $0.name == target }) {
            return ProfileSource(
                identity: "builtin:" + target, yaml: entry.yaml, file: Self.builtinFile(target), isBuiltin: true
            )
        } else if target == Profile.passThrough.name {
            return nil
        } else {
            throw reference.node.error(
                Suggestion.unknown(
                    "profile", target, among: self.builtins.map(\.name) + ["none"], listedAs: "built-in profiles"
                ) + "; or a path to a .yaml file relative to this file"
            )
        }
    }

    private func checkCycle(_ identity: String, chain: [String], at node: ConfigNode, key: String) throws(ConfigError) {
        if chain.contains(identity) {
            let names = (chain + [identity]).map { Self.displayName(identity: $0) }
            throw node.error("\(key) cycle: \(names.joined(separator: " → "))")
        }
    }

    /// The conditions of the profile a phase `use`s.
    private func conditions(
        of use: Located<String>,
        declaredIn file: String,
        isBuiltin: Bool,
        chain: [String]
    ) throws(ConfigError) -> LinkConditions {
        guard let source = try self.locate(use, from: file, isBuiltin: isBuiltin, chain: chain, key: "use") else {
            return Profile.passThrough.conditions
        }
        try self.checkCycle(source.identity, chain: chain, at: use.node, key: "use")
        let profile = try self.decode(
            yaml: source.yaml, file: source.file, isBuiltin: source.isBuiltin, chain: chain + [source.identity]
        )
        return profile.conditions
    }

    /// `layer` on top of everything it extends.
    private func effectiveLayer(
        _ layer: ProfileLayer,
        file: String,
        isBuiltin: Bool,
        chain: [String]
    ) throws(ConfigError) -> EffectiveLayer {
        guard let extends = layer.extends else {
            return EffectiveLayer().overlaid(by: layer)
        }
        guard let source = try self.locate(extends, from: file, isBuiltin: isBuiltin, chain: chain, key: "extend")
        else {
            return EffectiveLayer().overlaid(by: layer)
        }
        try self.checkCycle(source.identity, chain: chain, at: extends.node, key: "extends")
        let (baseYAML, baseFile, baseIsBuiltin, identity) = (
            source.yaml, source.file, source.isBuiltin, source.identity
        )
        let baseRoot = try ConfigNode.parse(yaml: baseYAML, file: baseFile)
        let baseLayer = try ProfileLayer(
            root: baseRoot, isBuiltin: baseIsBuiltin, files: self.fileAccess(isBuiltin: baseIsBuiltin))
        let base = try self.effectiveLayer(
            baseLayer, file: baseFile, isBuiltin: baseIsBuiltin, chain: chain + [identity]
        )
        return base.overlaid(by: layer)
    }

    private static func displayName(identity: String) -> String {
        if identity.hasPrefix("builtin:") { return String(identity.dropFirst("builtin:".count)) }
        if identity.hasPrefix("file:") {
            return (String(identity.dropFirst("file:".count)) as NSString).lastPathComponent
        }
        return identity
    }

    static func absolutePath(_ path: String) -> String {
        let absolute =
            path.hasPrefix("/")
            ? path
            : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
        return (absolute as NSString).standardizingPath
    }

    /// The largest profile or scenario file read.
    public static let maximumFileBytes = 16 << 20

    /// Reads a UTF-8 file; a failure is reported at `errorNode` (an `extends` value) when given,
    /// else for the whole file.
    static func readFile(_ path: String, errorFile: String, errorNode: ConfigNode?) throws(ConfigError) -> String {
        func fail(_ message: String) -> ConfigError {
            errorNode?.error(message) ?? ConfigError(file: errorFile, message: message)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            // A symbolic link that leads nowhere is there, but nothing is behind it.
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) {
                throw fail(
                    "\(path) is a symbolic link to \(target), which leads to no file (missing, or a loop of links)")
            }
            throw fail("no such file: \(path)")
        }
        guard !isDirectory.boolValue else {
            throw fail("\(path) is a folder; a profile is one .yaml file (netcond test takes a folder of scenarios)")
        }
        // Checked before reading: a profile or scenario is a few KB (an inline series, a few hundred).
        let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int ?? 0
        guard size <= Self.maximumFileBytes else {
            throw fail(
                "\(path) is \(size >> 20) MB; allowed: profile and scenario files up to \(Self.maximumFileBytes >> 20) MB"
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw fail("cannot read \(path)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw fail("\(path) is not UTF-8 text")
        }
        return text
    }
}

/// A profile as merged so far: the shared keys of all layers, not yet defaulted or cross-checked.
struct EffectiveLayer {
    var tcp: Located<CongestionControl>?
    var mss: Located<ByteCount>?
    var dnsDelay: Located<Span>?
    var connectDelay: Located<Span>?
    var up = DirectionLayer()
    var down = DirectionLayer()
    var schedule: ScheduleLayer?
    var stalls: StallLayer?
    var faults: [HTTPFault]?
    var setup = SetupRules()
    var captivePortal: CaptivePortalSpec?
    /// A file's `routes:` replace the ones it extends (first match wins, so the order is the file's).
    var routes: [RouteLayer]?
    /// Inherited as a whole: a file's `radio:` replaces the one it extends.
    var radio: RadioSpec?
    var ipv6Only: Located<IPv6OnlySpec?>?

    func overlaid(by layer: ProfileLayer) -> EffectiveLayer {
        var result = self
        if let radio = layer.radio { result.radio = radio.value }
        if let ipv6Only = layer.ipv6Only { result.ipv6Only = ipv6Only }
        if let routes = layer.routes { result.routes = routes }
        if let portal = layer.captivePortal { result.captivePortal = portal }
        if let faults = layer.faults { result.faults = faults }
        if let firewall = layer.firewall {
            result.setup.allowPorts = firewall.allowPorts
            result.setup.otherwise = firewall.otherwise
        }
        if let hold = layer.connectHold {
            result.setup.hold = hold.hold
            result.setup.holdFirst = hold.first
        }
        if let dnsFail = layer.dnsFail { result.setup.dnsFail = dnsFail }
        if let schedule = layer.schedule { result.schedule = schedule }
        if let stalls = layer.stalls { result.stalls = stalls }
        if let tcp = layer.tcp { result.tcp = tcp }
        if let mss = layer.mss { result.mss = mss }
        if let dnsDelay = layer.dnsDelay { result.dnsDelay = dnsDelay }
        if let connectDelay = layer.connectDelay { result.connectDelay = connectDelay }
        result.up = layer.up.overlaid(on: layer.link.overlaid(on: self.up))
        result.down = layer.down.overlaid(on: layer.link.overlaid(on: self.down))
        return result
    }

    /// The final profile: defaults filled in, then checks that span keys (queue ≥ mss).
    /// `conditionsOf` gives the conditions of a profile a phase `use`s (and the file declaring it).
    func resolve(
        name: String,
        own: ProfileLayer,
        conditionsOf: (Located<String>, String) throws(ConfigError) -> LinkConditions
    ) throws(ConfigError) -> Profile {
        let mss = self.mss?.value ?? Profile.defaultMSS
        let up = try Self.direction(self.up, mss: mss)
        let down = try Self.direction(self.down, mss: mss)
        var profile = Profile(
            name: name,
            description: own.description?.value ?? own.extends.map { "Based on \($0.value)." } ?? "",
            source: own.source?.value ?? "",
            up: up,
            down: down,
            dnsDelay: self.dnsDelay?.value ?? .zero,
            connectDelay: self.connectDelay?.value ?? .zero,
            tcp: self.tcp?.value ?? .cubic,
            mss: mss,
            stalls: self.stalls?.spec,
            faults: self.faults ?? [],
            setup: self.setup,
            captivePortal: self.captivePortal,
            radio: self.radio,
            ipv6Only: self.ipv6Only?.value
        )
        if let ipv6Only = self.ipv6Only, ipv6Only.value != nil, self.captivePortal != nil {
            throw ipv6Only.node.error(
                "ipv6_only and captive_portal together are not built yet (the portal catches IPv4 and ::1 connections, not NAT64's); allowed: one of them"
            )
        }
        if let schedule = self.schedule {
            var phases: [SchedulePhase] = []
            for phase in schedule.phases {
                let base =
                    try phase.use.map { use throws(ConfigError) in try conditionsOf(use, phase.file) }
                    ?? profile.conditions
                phases.append(try phase.resolve(base: base, mss: mss))
            }
            profile.schedule = ConditionSchedule(phases: phases, repeats: schedule.repeats)
        }
        profile.routes = try Self.routes(self.routes ?? [], conditionsOf: conditionsOf)
        return profile
    }

    /// Each route resolved as a profile of its own keys; names are unique (a route without a
    /// `name:` is called after its first host, numbered when two would be called the same).
    private static func routes(
        _ layers: [RouteLayer], conditionsOf: (Located<String>, String) throws(ConfigError) -> LinkConditions
    ) throws(ConfigError) -> [Route] {
        var routes: [Route] = []
        var taken: [String: ConfigNode] = [:]
        for layer in layers where layer.name != nil {
            if let earlier = taken[layer.name!] {
                throw (layer.body.name?.node ?? layer.node).error(
                    "a route named '\(layer.name!)' is already at line \(earlier.line); allowed: a name of its own for each route"
                )
            }
            taken[layer.name!] = layer.body.name?.node ?? layer.node
        }
        for layer in layers {
            var name = layer.displayName
            if layer.name == nil, taken[name] != nil {
                var number = 2
                while taken["\(name)#\(number)"] != nil { number += 1 }
                name = "\(name)#\(number)"
            }
            taken[name] = layer.node
            let profile = try EffectiveLayer().overlaid(by: layer.body).resolve(
                name: name, own: layer.body, conditionsOf: conditionsOf)
            routes.append(Route(name: name, match: layer.match, profile: profile, outage: layer.outage))
        }
        return routes
    }

    private static func direction(_ layer: DirectionLayer, mss: ByteCount) throws(ConfigError) -> LinkDirection {
        if let queue = layer.queue, queue.value < mss {
            throw queue.node.error(
                "queue \(queue.value) is smaller than one segment (mss \(mss)); allowed: mss…1GB (e.g. 64KB)"
            )
        }
        let series = layer.trace.flatMap { if case .series(let series) = $0.value { series } else { nil } }
        if series != nil, let other = layer.latency?.node ?? layer.loss?.node {
            throw other.error(
                "this direction's trace: is a step series, which sets the delay and the loss over time; remove \(other.keyPath.split(separator: ".").last.map(String.init) ?? "it") here"
            )
        }
        return LinkDirection(
            // Under a step series, its first row's delay stands for the direction's (its round-trip
            // estimates: a handshake's, a far end's close); the path takes each moment's from the series.
            latency: series?.steps[0].delay ?? layer.latency?.value ?? .zero,
            jitter: layer.jitter?.value ?? .zero,
            bandwidth: layer.bandwidth?.value ?? nil,
            queue: layer.queue?.value ?? LinkDirection.defaultQueue,
            loss: series != nil ? LossSpec.none : layer.loss?.value ?? LossSpec.none,
            connectionBandwidth: layer.connectionBandwidth?.value ?? nil,
            queuePackets: layer.queuePackets?.value,
            reorder: layer.reorder?.value.0 ?? .zero,
            reorderGap: layer.reorder?.value.1 ?? LinkDirection.defaultReorderGap,
            duplicate: layer.duplicate?.value ?? .zero,
            corrupt: layer.corrupt?.value ?? .zero,
            aqm: layer.aqm?.value ?? .dropTail,
            trace: layer.trace.flatMap { if case .opportunities(let trace) = $0.value { trace } else { nil } },
            series: series
        )
    }
}
