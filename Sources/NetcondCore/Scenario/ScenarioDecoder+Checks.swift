import Foundation
import Yams

/// The `checks:` section of a scenario file.
extension ScenarioDecoder {

    static func checks(_ node: ConfigNode, origin: OriginContent, client: ClientSpec) throws(ConfigError) -> [CheckSpec]
    {
        let map = try node.mapping(
            allowedKeys: CheckSpec.names, expecting: "a mapping of checks (\(CheckSpec.names.joined(separator: ", ")))")
        guard !map.entries.isEmpty else {
            throw node.error("no checks; allowed: \(CheckSpec.names.joined(separator: ", ")) (e.g. completes: {})")
        }
        let context = CheckContext(origin: origin, client: client)
        let defaultFile = context.defaultFile
        func fileReference(_ node: ConfigNode?, in check: ConfigNode) throws(ConfigError) -> String {
            try context.fileReference(node, in: check)
        }
        var checks: [CheckSpec] = []
        for (key, value) in map.entries {
            switch key {
            case "completes", "captive-safe":
                let spec = try value.mapping(allowedKeys: ["exit", "files"])
                var exit: Int32 = 0
                var outputs: [OutputFile] = []
                if let node = spec["exit"] { exit = Int32(try node.integer(in: 0...255, meaning: "an exit code")) }
                if let files = spec["files"] {
                    for (output, child) in try files.entries(
                        expecting: "a mapping of output files to origin files (e.g. {big.bin: big.bin})")
                    {
                        guard !output.hasPrefix("/"), !output.split(separator: "/").contains("..") else {
                            throw child.error("'\(output)' is not a path inside the working directory")
                        }
                        outputs.append(OutputFile(output: output, file: try fileReference(child, in: files)))
                    }
                } else if let output = client.output, let file = defaultFile {
                    outputs = [OutputFile(output: output, file: file)]
                }
                if key == "completes" {
                    checks.append(.completes(CompletesCheck(exit: exit, files: outputs, endpoint: Self.urlAPI(client))))
                } else {
                    guard !outputs.isEmpty else {
                        throw value.error(
                            "which files? the client writes no origin file; allowed: files: {OUTPUT: FILE} or client.output with a /files/ url"
                        )
                    }
                    checks.append(.captiveSafe(CaptiveSafeCheck(exit: exit, files: outputs)))
                }
            case "resumes":
                let spec = try value.mapping(allowedKeys: ["file", "slack", "tolerance"])
                var check = ResumesCheck(file: try fileReference(spec["file"], in: value))
                if let slack = spec["slack"] { check.slack = try slack.unit(ByteCount.parse) }
                if let tolerance = spec["tolerance"] { check.tolerance = try tolerance.unit(Probability.parse).value }
                checks.append(.resumes(check))
            case "stays-usable":
                checks.append(.staysUsable(try Self.staysUsable(value)))
            case "idempotent":
                checks.append(.idempotent(try Self.idempotent(value, context: context)))
            case "reconnects":
                let spec = try value.mapping(allowedKeys: ["within", "resume"])
                let within = try spec["within"]?.span(
                    in: .milliseconds(1)...(.seconds(3600)), allowed: "1ms…1h", example: "within: 10s")
                let resume =
                    try spec["resume"].map { node throws(ConfigError) in try node.choice(["true", "false"]) == "true" }
                    ?? true
                checks.append(.reconnects(ReconnectsCheck(within: within ?? .seconds(10), resume: resume)))
            case "revalidates":
                checks.append(.revalidates(try Self.revalidates(value, context: context)))
            case "overlaps":
                checks.append(.overlaps(try Self.overlaps(value)))
            case "delivers":
                checks.append(.delivers(try Self.delivers(value, context: context)))
            case "radio":
                checks.append(.radio(try Self.radio(value)))
            default:
                checks.append(.backsOff(try Self.backsOff(value, context: context)))
            }
        }
        return checks
    }

    /// What a check may refer to: the scenario's origin, and the file or endpoint of the client's url.
    struct CheckContext {
        var origin: OriginContent
        var client: ClientSpec

        /// The origin file of the client's url, which a check judges unless it names one.
        var defaultFile: String? { ScenarioDecoder.urlFile(self.client) }

        /// `file: NAME` of a check (or the url's file when absent): a file of origin.files.
        func fileReference(_ node: ConfigNode?, in check: ConfigNode) throws(ConfigError) -> String {
            guard let node else {
                guard let file = self.defaultFile else {
                    throw check.error(
                        "which file? the client's url is not an origin file; allowed: file: NAME from origin.files")
                }
                return file
            }
            let name = try node.string(expecting: "a file name from origin.files")
            guard self.origin.file(named: name) != nil else {
                throw node.error(
                    Suggestion.unknown(
                        "file", name, among: self.origin.files.map(\.name), listedAs: "files in origin.files"))
            }
            return name
        }
    }

    private static func idempotent(_ value: ConfigNode, context: CheckContext) throws(ConfigError) -> IdempotentCheck {
        let spec = try value.mapping(allowedKeys: ["api"])
        return IdempotentCheck(api: try Self.postEndpoint(spec["api"], in: value, context: context))
    }

    private static func backsOff(_ value: ConfigNode, context: CheckContext) throws(ConfigError) -> BacksOffCheck {
        let spec = try value.mapping(allowedKeys: ["file", "factor", "jitter", "max_per_minute", "recovery"])
        var check = BacksOffCheck()
        check.file =
            try spec["file"].map { node throws(ConfigError) in try context.fileReference(node, in: value) }
            ?? context.defaultFile
        if let factor = spec["factor"] {
            guard let number = Double(try factor.string(expecting: "a number")), number >= 1, number <= 10 else {
                throw factor.error("factor \(factor.text) is out of range; allowed: 1…10 (e.g. 1.5)")
            }
            check.factor = number
        }
        if let jitter = spec["jitter"] { check.jitter = try jitter.unit(Probability.parse).value }
        if let cap = spec["max_per_minute"] {
            check.maxPerMinute = try cap.integer(in: 1...100_000, meaning: "attempts per minute")
        }
        if let recovery = spec["recovery"] {
            check.recovery = try recovery.span(
                in: .zero...(.seconds(Int64(3600))), allowed: "0s…1h", example: "recovery: 10s")
        }
        return check
    }

    private static func staysUsable(_ node: ConfigNode) throws(ConfigError) -> StaysUsableCheck {
        let spec = try node.mapping(allowedKeys: [
            "lines", "requests", "host", "budget", "min_steps", "within", "gives_up_within",
        ])
        var check = StaysUsableCheck()
        if let lines = spec["lines"] {
            if spec["requests"] != nil {
                throw lines.error("lines and requests exclude each other; allowed: one of them")
            }
            let pattern = try lines.string(
                expecting: "a regular expression for the lines that mark a step (e.g. '^loaded ')")
            do {
                _ = try NSRegularExpression(pattern: pattern)
            } catch {
                throw lines.error(
                    "'\(pattern)' is not a regular expression (ICU syntax); allowed: e.g. '^loaded ' or 'page [0-9]+ ready'"
                )
            }
            check.steps = .lines(pattern)
        } else if let requests = spec["requests"] {
            let glob = try requests.string(
                expecting: "a path glob for the origin requests that are steps (e.g. /files/*)")
            guard glob.hasPrefix("/") else {
                throw requests.error("'\(glob)' is not a path; allowed: a glob starting with / (e.g. /files/*)")
            }
            check.steps = .requests(glob)
        }
        if let host = spec["host"] {
            guard case .requests = check.steps else {
                throw host.error(
                    "host picks which origin requests are steps; allowed: with requests: (e.g. requests: /files/*)")
            }
            let name = try host.string(expecting: "a host name or glob (e.g. static.example.com)")
            guard !name.isEmpty, !name.contains(" "), !name.contains("/"), !name.contains(":") else {
                throw host.error("'\(name)' is not a host name; allowed: a name or glob such as static.netcond.test")
            }
            check.host = name.lowercased()
        }
        if let budget = spec["budget"] {
            guard check.steps != nil else {
                throw budget.error("budget without steps; allowed: add lines: or requests:")
            }
            check.budget = try budget.span(
                in: .milliseconds(1)...(.seconds(Int64(3600))), allowed: "1ms…1h", example: "budget: 3s")
        } else if check.steps != nil {
            throw node.error(
                "steps without a budget; allowed: budget: DURATION, how long one step may take (e.g. budget: 3s)")
        }
        if let minimum = spec["min_steps"] {
            guard check.steps != nil else {
                throw minimum.error("min_steps without steps; allowed: add lines: or requests:")
            }
            check.minSteps = try minimum.integer(in: 0...1_000_000, meaning: "how many steps must happen")
        }
        if let within = spec["within"] {
            guard check.steps != nil else {
                throw within.error("within without steps; allowed: add lines: or requests:")
            }
            check.within = try within.span(
                in: .milliseconds(1)...(.seconds(Int64(3600))), allowed: "1ms…1h", example: "within: 12s")
        }
        if let within = spec["gives_up_within"] {
            check.givesUpWithin = try within.span(
                in: .milliseconds(100)...(.seconds(Int64(3600))), allowed: "100ms…1h", example: "gives_up_within: 20s")
        }
        guard check.steps != nil || check.givesUpWithin != nil else {
            throw node.error("nothing to judge; allowed: lines: or requests: with budget:, and/or gives_up_within:")
        }
        return check
    }
}

extension ScenarioDecoder {
    /// `radio: {max_on_share: 40%, max_promotions_per_minute: 2}` (at least one of them).
    static func radio(_ node: ConfigNode) throws(ConfigError) -> RadioCheck {
        let map = try node.mapping(
            allowedKeys: ["max_on_share", "max_promotions_per_minute"],
            expecting: "a mapping such as {max_on_share: 40%, max_promotions_per_minute: 2}")
        var check = RadioCheck()
        if let share = map["max_on_share"] { check.maxOnShare = try share.unit(Probability.parse) }
        if let rate = map["max_promotions_per_minute"] {
            let text = try rate.numberText(expecting: "a number of promotions a minute")
            guard let value = Double(text), value.isFinite, value >= 0, value <= 10_000 else {
                throw rate.error(
                    "'\(text)' is not a number of promotions a minute; allowed: a number 0…10000 (e.g. 2 or 0.5)")
            }
            check.maxPromotionsPerMinute = value
        }
        guard check.maxOnShare != nil || check.maxPromotionsPerMinute != nil else {
            throw node.error(
                "the radio check needs a limit; allowed: max_on_share (e.g. 40%), max_promotions_per_minute (e.g. 2), or both"
            )
        }
        return check
    }
}

extension ScenarioDecoder {
    /// A `radio` check judges the profile's radio: a scenario whose profile (and every profile its
    /// timeline switches to) has none cannot pass it, and is an error.
    /// Checks that judge something the profile or the timeline must bring: a `radio` check needs a
    /// radio, a `reconnects` check a handover.
    static func checkAgainstTimeline(
        _ checks: [CheckSpec], profile: Profile, timeline: [ScenarioEvent], node: ConfigNode?
    ) throws(ConfigError) {
        let handsOver = timeline.contains { if case .handover = $0.action { true } else { false } }
        if !handsOver, checks.contains(where: { if case .reconnects = $0 { true } else { false } }) {
            let message =
                "the reconnects check judges what the client does after a handover, and the timeline has none; allowed: a timeline event such as {at: 5s, handover: {to: lte, gap: 2s}}"
            let at = (try? node?.mapping(allowedKeys: CheckSpec.names)["reconnects"]) ?? node
            guard let at else { throw ConfigError(file: "", message: message) }
            throw at.error(message)
        }
        try Self.checkRadio(checks, profile: profile, timeline: timeline, node: node)
    }

    static func checkRadio(
        _ checks: [CheckSpec], profile: Profile, timeline: [ScenarioEvent], node: ConfigNode?
    ) throws(ConfigError) {
        guard checks.contains(where: { if case .radio = $0 { true } else { false } }), profile.radio == nil else {
            return
        }
        let switched = timeline.contains { $0.action.profileSwitchedTo?.radio != nil }
        guard !switched else { return }
        let at = (try? node?.mapping(allowedKeys: CheckSpec.names)["radio"]) ?? node
        let message =
            "the radio check judges the profile's radio, and profile \(profile.name) has none; allowed: a profile with radio: (e.g. profile: {extends: lte, radio: lte})"
        guard let at else { throw ConfigError(file: "", message: message) }
        throw at.error(message)
    }
}
