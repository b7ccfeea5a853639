import Foundation

/// How a resolved profile is shown to users: one row of the `netcond profiles` table, and the full
/// profile as YAML for `netcond profiles show NAME` (which reads back to the same profile).
///
/// ```
/// NAME  DOWN     UP       DELAY DOWN/UP  LOSS DOWN/UP  DESCRIPTION
/// edge  240kbit  200kbit  400ms/440ms    0%/0%         2.5G EDGE: 240/200 kbit/s, 400/440 ms one way
/// ```
extension Profile {
    /// Column titles matching `summaryRow`.
    public static let summaryHeader = ["NAME", "DOWN", "UP", "DELAY DOWN/UP", "LOSS DOWN/UP", "DESCRIPTION"]

    /// Name, down and up rate, one-way delays, mean loss and description, each as short text.
    public var summaryRow: [String] {
        [
            self.name,
            Self.rateText(self.down),
            Self.rateText(self.up),
            "\(self.down.latency)/\(self.up.latency)",
            "\(Self.lossText(self.down.loss))/\(Self.lossText(self.up.loss))",
            self.description,
        ]
    }

    /// A table of `profiles` with a header, columns padded with spaces, one line per profile.
    public static func summaryTable(_ profiles: [Profile]) -> String {
        let rows = [self.summaryHeader] + profiles.map(\.summaryRow)
        var widths = Array(repeating: 0, count: self.summaryHeader.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count - 1 {
                widths[index] = max(widths[index], cell.count)
            }
        }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index < widths.count - 1 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0) : cell
            }
            .joined(separator: "  ")
        }
        .joined(separator: "\n") + "\n"
    }

    /// The resolved profile as a YAML document in the profile schema, every key spelled out.
    /// `ProfileDecoder` reads it back to an equal `Profile`. A trace is named by its file's path.
    public var yamlDescription: String { self.yaml(inlineTraces: false) }

    /// As ``yamlDescription``; with `inlineTraces`, a trace is written out whole (`trace:
    /// {source, milliseconds}`), so the text names no file: what `netcond ctl profile FILE` sends to
    /// the control API, which reads no file.
    public func yaml(inlineTraces: Bool) -> String {
        var lines = [
            "name: \(Self.quoted(self.name))",
            "description: \(Self.quoted(self.description))",
            "source: \(Self.quoted(self.source))",
            "tcp: \(self.tcp.rawValue)",
            "mss: \(Self.exact(self.mss))",
            "dns_delay: \(Self.exact(self.dnsDelay))",
            "connect_delay: \(Self.exact(self.connectDelay))",
        ]
        for direction in [Direction.down, Direction.up] {
            lines.append("\(direction.rawValue):")
            lines += Self.directionYAML(self.direction(direction), inlineTraces: inlineTraces).map { "  " + $0 }
        }
        if let stalls = self.stalls {
            lines.append(
                "stalls: {every: \(Self.exact(stalls.every)), for: \(Self.exact(stalls.duration)), "
                    + "direction: \(stalls.direction)}"
            )
        }
        if let schedule = self.schedule {
            lines.append("schedule:")
            lines.append("  repeat: \(schedule.repeats)")
            lines.append("  phases:")
            for phase in schedule.phases {
                var phaseLines = [
                    "name: \(Self.quoted(phase.label))",
                    "for: \(Self.exact(phase.duration))",
                ]
                if let outage = phase.outage { phaseLines.append("outage: \(outage)") }
                if let stall = phase.stall { phaseLines.append("stall: \(stall)") }
                phaseLines.append("dns_delay: \(Self.exact(phase.conditions.dnsDelay))")
                phaseLines.append("connect_delay: \(Self.exact(phase.conditions.connectDelay))")
                for direction in [Direction.down, Direction.up] {
                    phaseLines.append("\(direction.rawValue):")
                    phaseLines += Self.directionYAML(phase.conditions.direction(direction), inlineTraces: inlineTraces)
                        .map { "  " + $0 }
                }
                lines.append("    - " + phaseLines[0])
                lines += phaseLines.dropFirst().map { "      " + $0 }
            }
        }
        if let ports = self.setup.allowPorts {
            lines.append(
                "firewall: {allow_ports: [\(ports.map(String.init).joined(separator: ", "))], otherwise: \(self.setup.otherwise.rawValue)}"
            )
        }
        if self.setup.hold > .zero {
            lines.append("connect_hold: {for: \(Self.exact(self.setup.hold)), first: \(self.setup.holdFirst)}")
        }
        if !self.setup.dnsFail.isEmpty {
            lines.append("dns_fail: [\(self.setup.dnsFail.map(Self.quoted).joined(separator: ", "))]")
        }
        if let portal = self.captivePortal {
            var keys = [
                "http: \(portal.http.rawValue)", "https: \(portal.https.rawValue)", "open: \(portal.startsOpen)",
            ]
            if let session = portal.session { keys.append("session: \(Self.exact(session))") }
            lines.append("captive_portal: {\(keys.joined(separator: ", "))}")
        }
        if let ipv6Only = self.ipv6Only {
            lines.append("ipv6_only: {nat64_prefix: \(ipv6Only.prefixDescription)}")
        }
        if let radio = self.radio {
            let keys = [
                "model: \(radio.model.rawValue)", "promotion: \(Self.exact(radio.promotion))",
                "promotion_power: \(radio.promotionPower)", "active_power: \(radio.activePower)",
                "inactivity: \(Self.exact(radio.inactivity))", "tail: \(Self.exact(radio.tail))",
                "tail_power: \(radio.tailPower)", "second_tail: \(Self.exact(radio.secondTail))",
                "second_tail_power: \(radio.secondTailPower)", "idle_power: \(radio.idlePower)",
            ]
            lines.append("radio: {\(keys.joined(separator: ", "))}")
        }
        if !self.faults.isEmpty {
            lines.append("faults:")
            lines += self.faults.map { "  - " + $0.yamlDescription }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Every key of a direction that differs from nothing: the text reads back to an equal
    /// direction (what `netcond ctl profile` sends must lose no condition). Reordering,
    /// duplicates, corruption and CoDel are written only when set.
    private static func directionYAML(_ link: LinkDirection, inlineTraces: Bool) -> [String] {
        let queue = link.queuePackets.map { "queue: \($0) packets" } ?? "queue: \(Self.exact(link.queue))"
        var lines: [String]
        if let series = link.series {
            // The series sets the rate, the delay and the loss.
            lines = [
                Self.seriesYAML(series, inline: inlineTraces),
                "jitter: \(Self.exact(link.jitter))",
                queue,
                "connection_bandwidth: \(Self.exactRate(link.connectionBandwidth))",
            ]
        } else {
            lines = [
                link.trace.map { Self.traceYAML($0, inline: inlineTraces) }
                    ?? "bandwidth: \(Self.exactRate(link.bandwidth))",
                "latency: \(Self.exact(link.latency))",
                "jitter: \(Self.exact(link.jitter))",
                queue,
                "loss: \(Self.lossYAML(link.loss))",
                "connection_bandwidth: \(Self.exactRate(link.connectionBandwidth))",
            ]
        }
        if link.reorder > .zero {
            lines.append("reorder: {probability: \(Self.exact(link.reorder)), gap: \(Self.exact(link.reorderGap))}")
        }
        if link.duplicate > .zero { lines.append("duplicate: \(Self.exact(link.duplicate))") }
        if link.corrupt > .zero { lines.append("corrupt: \(Self.exact(link.corrupt))") }
        if case .codel(let target, let interval) = link.aqm {
            lines.append("aqm: {type: codel, target: \(Self.exact(target)), interval: \(Self.exact(interval))}")
        }
        return lines
    }

    private static func seriesYAML(_ series: LinkSeries, inline: Bool) -> String {
        if inline {
            let repeats = series.period.map { ", repeat: \(Self.exact($0))" } ?? ""
            let interpolates = series.interpolates ? ", interpolate: linear" : ""
            return
                "trace: {source: \(Self.quoted(series.source)), series: \(Self.quoted(series.inlineText))\(repeats)\(interpolates)}"
        }
        let file = series.path.isEmpty ? series.source : series.path
        return "trace: \(Self.quoted(file))  # a step series of \(series.steps.count) rows, mean \(series.meanRate)"
    }

    // MARK: - Pieces

    private static func traceYAML(_ trace: LinkTrace, inline: Bool) -> String {
        if inline {
            return "trace: {source: \(Self.quoted(trace.source)), milliseconds: \(Self.quoted(trace.millisecondsText))}"
        }
        let file = trace.path.isEmpty ? trace.source : trace.path
        return
            "trace: \(Self.quoted(file))  # \(trace.opportunityCount) opportunities in \(trace.periodMilliseconds) ms, mean \(trace.meanRate)"
    }

    /// A direction's rate for the table: its bandwidth, or its trace's mean.
    private static func rateText(_ link: LinkDirection) -> String {
        if let series = link.series { return "~\(series.meanRate) (series)" }
        guard let trace = link.trace else { return Self.rateText(link.bandwidth) }
        return "~\(trace.meanRate) (trace)"
    }

    static func rateText(_ rate: Bandwidth?) -> String {
        rate.map(\.description) ?? "unlimited"
    }

    /// `0%`, `10%`, or `~0.8%` for bursts (the long-run mean).
    static func lossText(_ loss: LossSpec) -> String {
        switch loss {
        case .none: return "0%"
        case .bernoulli(let p): return p.description
        case .gilbertElliott: return "~\(formatTrimmed(loss.meanRate * 100))%"
        }
    }

    static func lossYAML(_ loss: LossSpec) -> String {
        switch loss {
        case .none:
            return "0%"
        case .bernoulli(let p):
            return self.exact(p)
        case .gilbertElliott(let p, let r, let lossInGood, let lossInBad):
            return "{model: gilbert-elliott, p: \(self.exact(p)), r: \(self.exact(r)), "
                + "loss_in_bad: \(self.exact(lossInBad)), loss_in_good: \(self.exact(lossInGood))}"
        }
    }

    /// A double-quoted YAML string (JSON escaping is valid YAML).
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    result += String(format: "\\u%04X", scalar.value)
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }

    /// The human form when it reads back exactly, else the exact form in the smallest unit.
    static func exact(_ span: Span) -> String {
        let human = span.description
        return (try? Span.parse(human)) == span ? human : "\(span.nanoseconds)ns"
    }

    static func exact(_ range: SpanRange) -> String {
        range.isFixed ? self.exact(range.lower) : "\(self.exact(range.lower))..\(self.exact(range.upper))"
    }

    static func exact(_ bytes: ByteCount) -> String {
        let human = bytes.description
        return (try? ByteCount.parse(human)) == bytes ? human : "\(bytes.bytes)B"
    }

    static func exactRate(_ rate: Bandwidth?) -> String {
        guard let rate else { return "unlimited" }
        let human = rate.description
        return (try? Bandwidth.parse(human)) == rate ? human : "\(rate.bitsPerSecond)bit"
    }

    static func exact(_ probability: Probability) -> String {
        let human = probability.description
        if (try? Probability.parse(human)) == probability { return human }
        for digits in 0...24 {
            let percent = String(format: "%.\(digits)f%%", probability.value * 100)
            if (try? Probability.parse(percent)) == probability { return percent }
        }
        for digits in 1...40 {
            let fraction = String(format: "%.\(digits)f", probability.value)
            if (try? Probability.parse(fraction)) == probability { return fraction }
        }
        return human
    }
}
