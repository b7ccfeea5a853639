import Foundation
import Yams

/// The keys of one direction (`up:`, `down:` or `link:`) that a file sets.
struct DirectionLayer {
    static let keys = [
        "bandwidth", "latency", "jitter", "queue", "loss", "connection_bandwidth", "reorder", "duplicate", "corrupt",
        "aqm",
        "trace",
    ]
    static let reorderKeys = ["probability", "gap"]
    static let aqmKeys = ["type", "target", "interval"]
    static let lossKeys = ["model", "p", "r", "loss_in_bad", "loss_in_good"]
    static let lossModels = ["gilbert-elliott"]

    var latency: Located<Span>?
    var jitter: Located<Span>?
    var bandwidth: Located<Bandwidth?>?
    var queue: Located<ByteCount>?
    var queuePackets: Located<Int>?
    var loss: Located<LossSpec>?
    var connectionBandwidth: Located<Bandwidth?>?
    var reorder: Located<(Probability, Span)>?
    var duplicate: Located<Probability>?
    var corrupt: Located<Probability>?
    var aqm: Located<QueueDiscipline>?
    var trace: Located<TraceFile>?

    init() {}

    /// Reads every key; all that were wrong are thrown together.
    init(node: ConfigNode, files: ProfileDecoder.FileReferences) throws(ConfigError) {
        let problems = ConfigProblems(file: node.file)
        self.init(node: node, files: files, problems: problems)
        try problems.check()
    }

    /// Reads every key, noting each wrong one in `problems` and going on to the next.
    init(node: ConfigNode, files: ProfileDecoder.FileReferences, problems: ConfigProblems) {
        guard
            let map = problems.attempt({ () throws(ConfigError) in
                try node.mapping(
                    allowedKeys: Self.keys, expecting: "a mapping of link keys (\(Self.keys.joined(separator: ", ")))",
                    problems: problems)
            })
        else { return }
        self.readDelays(map, problems: problems)
        self.readRates(map, files: files, problems: problems)
        self.readQueue(map, problems: problems)
        self.readDropsAndDamage(map, problems: problems)
    }

    /// `latency` and `jitter`.
    private mutating func readDelays(_ map: ConfigMapping, problems: ConfigProblems) {
        if let node = map["latency"] {
            problems.attempt { () throws(ConfigError) in
                let value = try node.unit(Span.parse)
                guard value <= .seconds(Int64(3600)) else {
                    throw node.error("\(node.text) is more than 1 hour; allowed: one-way delay 0…1h (e.g. 400ms)")
                }
                self.latency = Located(value: value, node: node)
            }
        }
        if let node = map["jitter"] {
            problems.attempt { () throws(ConfigError) in
                let value = try node.unit(Span.parse)
                guard value <= .seconds(Int64(10)) else {
                    throw node.error("\(node.text) is more than 10s; allowed: 0…10s (e.g. 20ms)")
                }
                self.jitter = Located(value: value, node: node)
            }
        }
    }

    /// `bandwidth`, `trace` (a rate that moves, in its place) and `connection_bandwidth`.
    private mutating func readRates(
        _ map: ConfigMapping, files: ProfileDecoder.FileReferences, problems: ConfigProblems
    ) {
        if let node = map["bandwidth"] {
            problems.attempt { () throws(ConfigError) in
                self.bandwidth = Located(value: try Self.rate(node), node: node)
            }
        }
        if let node = map["trace"] {
            problems.attempt { () throws(ConfigError) in
                if map["bandwidth"] != nil {
                    throw node.error("a trace sets the rate in place of bandwidth; keep one of trace and bandwidth")
                }
                if case .mapping = node.node {
                    self.trace = Located(value: try Self.inlineTrace(node), node: node)
                } else {
                    if case .refused(let refusal) = files {
                        throw node.error("trace: names a file; \(refusal)")
                    }
                    self.trace = Located(value: try Self.trace(node), node: node)
                }
                if case .series? = self.trace?.value, let other = map["latency"] ?? map["loss"] {
                    throw other.error(
                        "the step series of trace: sets the delay and the loss over time; keep latency and loss out of this direction"
                    )
                }
            }
        }
        if let node = map["connection_bandwidth"] {
            problems.attempt { () throws(ConfigError) in
                self.connectionBandwidth = Located(value: try Self.rate(node), node: node)
            }
        }
    }

    /// `queue`, in bytes or in packets.
    private mutating func readQueue(_ map: ConfigMapping, problems: ConfigProblems) {
        if let node = map["queue"] {
            problems.attempt { () throws(ConfigError) in
                let text = node.value.trimmingCharacters(in: .whitespaces)
                if let count = Self.packetCount(text) {
                    guard (1...100_000).contains(count) else {
                        throw node.error(
                            "\(text) is not 1 to 100000 packets; allowed: mss…1GB (e.g. 64KB), or 1…100000 packets (e.g. 100 packets)"
                        )
                    }
                    self.queuePackets = Located(value: count, node: node)
                } else {
                    let value = try node.unit(ByteCount.parse)
                    guard value <= ByteCount(bytes: 1 << 30) else {
                        throw node.error(
                            "\(node.text) is more than 1GB; allowed: mss…1GB (e.g. 64KB), or a count of packets (e.g. 100 packets)"
                        )
                    }
                    self.queue = Located(value: value, node: node)
                }
            }
        }
    }

    /// What reorders, copies, changes or drops a packet: `reorder`, `duplicate`, `corrupt`, `aqm`, `loss`.
    private mutating func readDropsAndDamage(_ map: ConfigMapping, problems: ConfigProblems) {
        if let node = map["reorder"] {
            problems.attempt { () throws(ConfigError) in
                self.reorder = Located(value: try Self.reorder(node), node: node)
            }
        }
        if let node = map["duplicate"] {
            problems.attempt { () throws(ConfigError) in
                self.duplicate = Located(value: try node.unit(Probability.parse), node: node)
            }
        }
        if let node = map["corrupt"] {
            problems.attempt { () throws(ConfigError) in
                self.corrupt = Located(value: try node.unit(Probability.parse), node: node)
            }
        }
        if let node = map["aqm"] {
            problems.attempt { () throws(ConfigError) in
                self.aqm = Located(value: try Self.aqm(node), node: node)
            }
        }
        if let node = map["loss"] {
            problems.attempt { () throws(ConfigError) in
                self.loss = Located(value: try Self.loss(node), node: node)
            }
        }
    }

    /// `trace: FILE`: a mahimahi trace, the path relative to the file that names it.
    private static func trace(_ node: ConfigNode) throws(ConfigError) -> TraceFile {
        let named = node.value.trimmingCharacters(in: .whitespaces)
        guard !named.isEmpty else {
            throw node.error(
                "expected the path of a trace file (mahimahi's format: one time in milliseconds per line), e.g. trace: traces/lte-driving.trace"
            )
        }
        let base = URL(fileURLWithPath: node.file.isEmpty ? "." : node.file).deletingLastPathComponent()
        let path = named.hasPrefix("/") ? named : base.appendingPathComponent(named).path
        guard FileManager.default.fileExists(atPath: path) else {
            throw node.error(
                "no trace file '\(named)' (looked for \(path)); the path is relative to the file that names it")
        }
        do {
            return try TraceFile.read(path: path, source: named)
        } catch {
            let shown = named.hasPrefix("/") ? named : path
            throw ConfigError(
                file: shown, line: error.line, keyPath: "",
                message: error.message + " (the trace of \(node.file):\(node.line))")
        }
    }

    /// `trace: {source: NAME, milliseconds: "1 1 2 5 8"}` or `{source: NAME, series: "0, 8mbit,
    /// 20ms, 0%; 1.5, 1mbit, 80ms, 2%"}`: a trace written out whole (what `netcond ctl profile FILE`
    /// sends, as the control API reads no file).
    private static func inlineTrace(_ node: ConfigNode) throws(ConfigError) -> TraceFile {
        let map = try node.mapping(
            allowedKeys: ["source", "milliseconds", "series", "repeat", "interpolate"],
            expecting: "a trace file's path, or {source: NAME, milliseconds: \"1 1 2 5 8\"} (the times written out), "
                + "or {source: NAME, series: \"0, 8mbit, 20ms, 0%; 1.5, 1mbit, 80ms, 2%\"}"
        )
        let source =
            try map["source"].map { node throws(ConfigError) in try node.string(expecting: "the trace's name") }
            ?? "inline"
        if let rows = map["series"] {
            let period = try map["repeat"].map { node throws(ConfigError) in try node.unit(Span.parse) }
            let interpolates = try map["interpolate"].map { node throws(ConfigError) in
                try node.choice(["linear", "step"]) == "linear"
            }
            do {
                return .series(
                    try LinkSeries.parse(rows.value, source: source, period: period, interpolates: interpolates))
            } catch {
                throw rows.error(error.message)
            }
        }
        let times = try map.required(
            "milliseconds", meaning: "the opportunity times, in milliseconds, separated by spaces")
        do {
            return .opportunities(try LinkTrace.parse(times.value, source: source))
        } catch {
            throw times.error(error.message)
        }
    }

    /// `100 packets` (or `1 packet`): the count, else nil.
    static func packetCount(_ text: String) -> Int? {
        let words = text.lowercased().split(separator: " ", omittingEmptySubsequences: true)
        guard words.count == 2, words[1] == "packets" || words[1] == "packet" else { return nil }
        return Int(words[0])
    }

    /// `reorder: 1%`, or `{probability: 1%, gap: 20ms}`: how often a packet is held back, and by how much.
    private static func reorder(_ node: ConfigNode) throws(ConfigError) -> (Probability, Span) {
        if case .mapping = node.node {
            let map = try node.mapping(allowedKeys: Self.reorderKeys, expecting: "{probability: 1%, gap: 10ms}")
            let probability = try map.required("probability", meaning: "how often a packet is held back, e.g. 1%")
                .unit(Probability.parse)
            var gap = LinkDirection.defaultReorderGap
            if let gapNode = map["gap"] {
                gap = try gapNode.unit(Span.parse)
                guard gap > .zero, gap <= .seconds(Int64(10)) else {
                    throw gapNode.error("\(gapNode.text) is not above 0 and at most 10s; allowed: 1ms…10s (e.g. 10ms)")
                }
            }
            return (probability, gap)
        }
        return (try node.unit(Probability.parse), LinkDirection.defaultReorderGap)
    }

    /// `aqm: codel` (target 5ms, interval 100ms), `aqm: {type: codel, target: 5ms, interval: 100ms}`,
    /// or `aqm: drop-tail` (the default).
    private static func aqm(_ node: ConfigNode) throws(ConfigError) -> QueueDiscipline {
        let allowed = "allowed: drop-tail, codel, or {type: codel, target: 5ms, interval: 100ms}"
        if case .mapping = node.node {
            let map = try node.mapping(
                allowedKeys: Self.aqmKeys, expecting: "{type: codel, target: 5ms, interval: 100ms}")
            let type = try map.required("type", meaning: "the queue discipline, codel")
            guard type.value.trimmingCharacters(in: .whitespaces).lowercased() == "codel" else {
                throw type.error("'\(type.text)' is not a queue discipline with parameters; \(allowed)")
            }
            var target = QueueDiscipline.defaultTarget
            var interval = QueueDiscipline.defaultInterval
            if let node = map["target"] {
                target = try node.unit(Span.parse)
                guard target > .zero, target <= .seconds(Int64(1)) else {
                    throw node.error("target \(node.text) is not above 0 and at most 1s; allowed: e.g. 5ms")
                }
            }
            if let node = map["interval"] {
                interval = try node.unit(Span.parse)
                guard interval > target, interval <= .seconds(Int64(10)) else {
                    throw node.error(
                        "interval \(node.text) is not above the target (\(target)) and at most 10s; allowed: e.g. 100ms"
                    )
                }
            }
            return .codel(target: target, interval: interval)
        }
        switch node.value.trimmingCharacters(in: .whitespaces).lowercased() {
        case "codel": return .codel(target: QueueDiscipline.defaultTarget, interval: QueueDiscipline.defaultInterval)
        case "drop-tail", "droptail", "fifo": return .dropTail
        default: throw node.error("'\(node.text)' is not a queue discipline; \(allowed)")
        }
    }

    private static func rate(_ node: ConfigNode) throws(ConfigError) -> Bandwidth? {
        let value = try node.unit(Bandwidth.parseLimit)
        if let value, value.bitsPerSecond == 0 {
            throw node.error(
                "a rate of 0 never delivers anything; for a dead link use the built-in profile `offline` "
                    + "or `loss: 100%`; allowed: unlimited, or a rate above 0 (e.g. 240kbit)"
            )
        }
        if let value, value > Bandwidth(bitsPerSecond: 100_000_000_000) {
            throw node.error("\(node.text) is more than 100Gbit; allowed: up to 100Gbit, or unlimited (e.g. 1Gbit)")
        }
        return value
    }

    private static func loss(_ node: ConfigNode) throws(ConfigError) -> LossSpec {
        switch node.node {
        case .scalar:
            let value = try node.unit(Probability.parse)
            return value == .zero ? .none : .bernoulli(value)
        case .mapping:
            let map = try node.mapping(allowedKeys: Self.lossKeys)
            _ = try map.required(
                "model", meaning: "the loss model: gilbert-elliott; for independent losses write `loss: 1%`"
            )
            if let model = map["model"] { _ = try model.choice(Self.lossModels) }
            let p = try map.required("p", meaning: "probability per segment of entering the bad state, e.g. 1%")
                .unit(Probability.parse)
            let rNode = try map.required("r", meaning: "probability per segment of leaving the bad state, e.g. 25%")
            let r = try rNode.unit(Probability.parse)
            let lossInBad = try map["loss_in_bad"]?.unit(Probability.parse) ?? .one
            let lossInGood = try map["loss_in_good"]?.unit(Probability.parse) ?? .zero
            if r == .zero && p > .zero {
                throw rNode.error(
                    "r = 0% means the link never leaves the bad state; for a dead link write `loss: 100%`; "
                        + "allowed: a probability above 0% (e.g. 25%)"
                )
            }
            return .gilbertElliott(p: p, r: r, lossInGood: lossInGood, lossInBad: lossInBad)
        default:
            throw node.error(
                "expected a probability (e.g. 1%) or a mapping "
                    + "{model: gilbert-elliott, p: 1%, r: 25%, loss_in_bad: 100%, loss_in_good: 0%}, "
                    + "found \(node.kindDescription)"
            )
        }
    }

    /// Keys set here win over `base`.
    func overlaid(on base: DirectionLayer) -> DirectionLayer {
        var result = base
        if let latency = self.latency { result.latency = latency }
        if let jitter = self.jitter { result.jitter = jitter }
        if let bandwidth = self.bandwidth {
            result.bandwidth = bandwidth
            result.trace = nil
        }
        if let trace = self.trace {
            result.trace = trace
            result.bandwidth = nil
            if case .series = trace.value {
                // A step series sets the delay and the loss too, in place of the base's.
                result.latency = nil
                result.loss = nil
            }
        }
        if let queue = self.queue {
            result.queue = queue
            result.queuePackets = nil
        }
        if let packets = self.queuePackets {
            result.queuePackets = packets
            result.queue = nil
        }
        if let reorder = self.reorder { result.reorder = reorder }
        if let duplicate = self.duplicate { result.duplicate = duplicate }
        if let corrupt = self.corrupt { result.corrupt = corrupt }
        if let aqm = self.aqm { result.aqm = aqm }
        if let loss = self.loss { result.loss = loss }
        if let connectionBandwidth = self.connectionBandwidth { result.connectionBandwidth = connectionBandwidth }
        return result
    }
}
