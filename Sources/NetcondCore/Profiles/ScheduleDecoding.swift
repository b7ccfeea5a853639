import Foundation

/// The `schedule:` and `stalls:` keys of one profile file, validated; phases are resolved into
/// conditions only once the whole profile is merged (a phase without `use:` means "this profile").
///
/// ```yaml
/// schedule:
///   repeat: true
///   phases:
///     - {name: street, for: 60s..120s}                      # this profile's conditions
///     - {name: tunnel, for: 20s..40s, outage: blackhole}
///     - {name: platform, for: 30s, use: 3g, down: {loss: 2%}}
/// stalls: {every: 20s, for: 2s..4s, direction: down}
/// ```
struct ScheduleLayer {
    static let keys = ["repeat", "phases"]

    var node: ConfigNode
    var repeats: Bool
    var phases: [PhaseLayer]

    init(node: ConfigNode, file: String, files: ProfileDecoder.FileReferences) throws(ConfigError) {
        self.node = node
        let map = try node.mapping(
            allowedKeys: Self.keys, expecting: "a mapping with phases: (a list) and optionally repeat: true"
        )
        if let node = map["repeat"] {
            let word = try node.choice(["true", "false"])
            self.repeats = word == "true"
        } else {
            self.repeats = false
        }
        let phasesNode = try map.required(
            "phases", meaning: "the list of phases, e.g. [{for: 90s}, {for: 30s, outage: blackhole}]"
        )
        let list = try phasesNode.list()
        guard !list.isEmpty else {
            throw phasesNode.error("the list is empty; allowed: one or more phases, each with for: DURATION")
        }
        guard list.count <= 1000 else {
            throw phasesNode.error("\(list.count) phases; allowed: at most 1000")
        }
        var phases: [PhaseLayer] = []
        for element in list {
            phases.append(try PhaseLayer(node: element, file: file, files: files))
        }
        self.phases = phases
    }
}

/// One phase of a schedule as written.
struct PhaseLayer {
    static let keys = [
        "name", "for", "use", "link", "up", "down", "dns_delay", "connect_delay", "outage", "stall",
    ]

    var node: ConfigNode
    /// The file that declared it (a relative `use:` path starts from its directory).
    var file: String
    var name: String?
    var duration: SpanRange
    var use: Located<String>?
    var link = DirectionLayer()
    var up = DirectionLayer()
    var down = DirectionLayer()
    var dnsDelay: Span?
    var connectDelay: Span?
    var outage: OutageBehaviour?
    var stall: StallDirection?

    init(node: ConfigNode, file: String, files: ProfileDecoder.FileReferences) throws(ConfigError) {
        self.node = node
        self.file = file
        let map = try node.mapping(
            allowedKeys: Self.keys,
            expecting: "a phase: a mapping with for: DURATION (e.g. {for: 30s, outage: blackhole})"
        )
        if let name = map["name"] {
            self.name = try name.name(expecting: "a short label", what: "the phase name", example: "tunnel")
        }
        self.duration = try SpanRange.decode(
            map.required("for", meaning: "how long the phase lasts: 30s, or a range 20s..40s drawn per cycle"),
            example: "for: 30s"
        )
        if let use = map["use"] {
            self.use = Located(value: try use.string(expecting: "a profile name or file"), node: use)
        }
        if let node = map["link"] { self.link = try DirectionLayer(node: node, files: files) }
        if let node = map["up"] { self.up = try DirectionLayer(node: node, files: files) }
        if let node = map["down"] { self.down = try DirectionLayer(node: node, files: files) }
        if let node = map["dns_delay"] { self.dnsDelay = try node.setupDelay(example: "2s") }
        if let node = map["connect_delay"] { self.connectDelay = try node.setupDelay(example: "2s") }
        if let node = map["outage"] {
            self.outage = try node.choice(OutageBehaviour.self)
        }
        if let node = map["stall"] {
            self.stall = try node.choice(StallDirection.self)
        }
    }

    /// The phase's conditions: `base` (the `use:` profile's, or the profile's own), with this
    /// phase's keys on top.
    func resolve(base: LinkConditions, mss: ByteCount) throws(ConfigError) -> SchedulePhase {
        var conditions = base
        conditions.up = try self.up.overlaid(on: self.link).applied(to: conditions.up, mss: mss)
        conditions.down = try self.down.overlaid(on: self.link).applied(to: conditions.down, mss: mss)
        if let dnsDelay = self.dnsDelay { conditions.dnsDelay = dnsDelay }
        if let connectDelay = self.connectDelay { conditions.connectDelay = connectDelay }
        let label = self.name ?? self.use?.value ?? self.outage.map { "outage (\($0))" } ?? "phase"
        return SchedulePhase(
            label: label,
            duration: self.duration,
            conditions: conditions,
            outage: self.outage,
            stall: self.stall
        )
    }
}

/// `stalls:` as written.
struct StallLayer {
    static let keys = ["every", "for", "direction"]

    var spec: StallSpec

    init(node: ConfigNode) throws(ConfigError) {
        let map = try node.mapping(
            allowedKeys: Self.keys, expecting: "a mapping {every: 20s, for: 4s, direction: both}"
        )
        let everyNode = try map.required(
            "every", meaning: "time from the start of one stall to the start of the next: 20s, or a range 15s..25s"
        )
        let every = try SpanRange.decode(everyNode, example: "every: 20s")
        let duration = try SpanRange.decode(
            map.required("for", meaning: "how long each stall lasts: 4s, or a range 2s..6s"),
            example: "for: 4s"
        )
        var direction = StallDirection.both
        if let node = map["direction"] {
            direction = try node.choice(StallDirection.self)
        }
        guard every.lower > duration.upper else {
            throw everyNode.error(
                "every \(every) is not longer than for \(duration): stalls would overlap; "
                    + "allowed: every longer than the longest stall (e.g. every: 20s, for: 4s)"
            )
        }
        self.spec = StallSpec(every: every, duration: duration, direction: direction)
    }
}

extension SpanRange {
    /// `30s` or `20s..40s`; above 0, at most 24 hours.
    static func decode(_ node: ConfigNode, example: String) throws(ConfigError) -> SpanRange {
        let text = try node.string(expecting: "a duration (e.g. 30s) or a range (e.g. 20s..40s)")
        let parts = text.components(separatedBy: "..")
        guard parts.count <= 2 else {
            throw node.error("'\(text)' is not a duration or a range; allowed: 30s, or 20s..40s")
        }
        var bounds: [Span] = []
        for part in parts {
            do {
                bounds.append(try Span.parse(part.trimmingCharacters(in: .whitespaces)))
            } catch {
                throw node.error(error.message + (parts.count == 2 ? " (in the range '\(text)')" : ""))
            }
        }
        let lower = bounds[0]
        let upper = bounds.count == 2 ? bounds[1] : lower
        guard lower >= .milliseconds(1) else {
            throw node.error("\(text) is too short; allowed: 1ms…24h (e.g. \(example))")
        }
        guard upper <= .seconds(Int64(24 * 3600)) else {
            throw node.error("\(text) is more than 24 hours; allowed: 1ms…24h (e.g. \(example))")
        }
        guard lower <= upper else {
            throw node.error("the range \(text) runs backwards; allowed: LOW..HIGH with LOW ≤ HIGH (e.g. 20s..40s)")
        }
        return SpanRange(lower, upper)
    }
}

extension DirectionLayer {
    /// The keys set here applied to resolved conditions (a phase's overrides).
    func applied(to base: LinkDirection, mss: ByteCount) throws(ConfigError) -> LinkDirection {
        var result = base
        if let latency = self.latency { result.latency = latency.value }
        if let jitter = self.jitter { result.jitter = jitter.value }
        if let bandwidth = self.bandwidth {
            result.bandwidth = bandwidth.value
            result.trace = nil
            result.series = nil
        }
        if let trace = self.trace {
            result.bandwidth = nil
            switch trace.value {
            case .opportunities(let opportunities):
                result.trace = opportunities
                result.series = nil
            case .series(let series):
                result.series = series
                result.trace = nil
                result.latency = series.steps[0].delay
                result.loss = .none
            }
        }
        if let queue = self.queue {
            guard queue.value >= mss else {
                throw queue.node.error(
                    "queue \(queue.value) is smaller than one segment (mss \(mss)); allowed: mss…1GB (e.g. 64KB)"
                )
            }
            result.queue = queue.value
            result.queuePackets = nil
        }
        if let packets = self.queuePackets { result.queuePackets = packets.value }
        if let reorder = self.reorder {
            result.reorder = reorder.value.0
            result.reorderGap = reorder.value.1
        }
        if let duplicate = self.duplicate { result.duplicate = duplicate.value }
        if let corrupt = self.corrupt { result.corrupt = corrupt.value }
        if let aqm = self.aqm { result.aqm = aqm.value }
        if let loss = self.loss { result.loss = loss.value }
        if let connectionBandwidth = self.connectionBandwidth {
            result.connectionBandwidth = connectionBandwidth.value
        }
        return result
    }
}
