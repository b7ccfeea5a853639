import Foundation

/// A link whose rate, delay and loss move over time, as measured: netcond's own step series, for
/// what a delivery-opportunity trace (``LinkTrace``) cannot say. One row per step, `t, rate, delay,
/// loss`: from `t` (seconds since the run began) the link has that rate, one-way delay and loss
/// probability, until the next row. Two directives, as comments before the rows:
/// `# repeat: 14s` starts the series over every 14 s (without it the last row holds), and
/// `# interpolate: linear` moves the values in a straight line from one row to the next (without it
/// they step).
///
/// ```
///  # repeat: 3s
///  0,   8mbit, 20ms, 0%        rate ▔▔▔▔▔╲▁▁▁▁▁▁▔▔▔▔▔   stepped: ▔▔▔▔▔|▁▁▁▁▁|▔▔▔
///  1.5, 1mbit, 80ms, 2%             0  1.5    3  4.5
/// ```
/// Loss 100% is an outage: everything offered meanwhile is lost. A rate is never 0 (a link that
/// delivers nothing is an outage, or a trace with a gap).
public struct LinkSeries: Sendable, Equatable, CustomStringConvertible {
    public struct Step: Sendable, Equatable {
        public var at: Span
        public var rate: Bandwidth
        public var delay: Span
        public var loss: Probability
    }

    /// The file as the user named it, and as a path that reads back from anywhere.
    public let source: String
    public let path: String
    /// The series starts over every this long (nil: the last row holds).
    public let period: Span?
    public let interpolates: Bool
    private let storage: Storage

    private final class Storage: Sendable {
        let steps: [Step]
        init(_ steps: [Step]) { self.steps = steps }
    }

    public var steps: [Step] { self.storage.steps }

    public init(steps: [Step], period: Span?, interpolates: Bool, source: String, path: String = "") {
        precondition(steps.first?.at == .zero, "a series starts at 0")
        self.storage = Storage(steps)
        self.period = period
        self.interpolates = interpolates
        self.source = source
        self.path = path
    }

    public static func == (a: LinkSeries, b: LinkSeries) -> Bool {
        a.period == b.period && a.interpolates == b.interpolates && a.source == b.source
            && (a.storage === b.storage || a.storage.steps == b.storage.steps)
    }

    public var description: String {
        "series \(self.source) (\(self.steps.count) steps" + (self.period.map { ", repeating every \($0)" } ?? "") + ")"
    }

    /// The time-weighted mean rate over one period (or over the rows, the last counting as long as the one before it).
    public var meanRate: Bandwidth {
        let steps = self.steps
        let end =
            self.period
            ?? (steps.count > 1 ? steps.last!.at + (steps.last!.at - steps[steps.count - 2].at) : .seconds(1))
        var bits = 0.0
        for (index, step) in steps.enumerated() where step.at < end {
            let next = index + 1 < steps.count ? min(steps[index + 1].at, end) : end
            bits += Double(step.rate.bitsPerSecond) * (next - step.at).seconds
        }
        return Bandwidth(bitsPerSecond: max(1, Int64(bits / max(end.seconds, 1e-9))))
    }

    /// The rate, delay and loss in force at `moment` (since the run began).
    public func conditions(at moment: Instant) -> (rate: Bandwidth, delay: Span, loss: Probability) {
        let steps = self.steps
        var t = Span(nanoseconds: max(0, moment.nanoseconds))
        if let period = self.period { t = Span(nanoseconds: t.nanoseconds % period.nanoseconds) }
        var low = 0
        var high = steps.count
        while low + 1 < high {
            let middle = (low + high) / 2
            if steps[middle].at <= t { low = middle } else { high = middle }
        }
        let step = steps[low]
        guard self.interpolates else { return (step.rate, step.delay, step.loss) }
        let next: Step
        let nextAt: Span
        if low + 1 < steps.count {
            next = steps[low + 1]
            nextAt = next.at
        } else if let period = self.period {
            next = steps[0]
            nextAt = period
        } else {
            return (step.rate, step.delay, step.loss)
        }
        let fraction = nextAt > step.at ? (t - step.at).seconds / (nextAt - step.at).seconds : 0
        func mix(_ a: Double, _ b: Double) -> Double { a + (b - a) * fraction }
        return (
            Bandwidth(
                bitsPerSecond: Int64(mix(Double(step.rate.bitsPerSecond), Double(next.rate.bitsPerSecond)).rounded())),
            Span(nanoseconds: Int64(mix(Double(step.delay.nanoseconds), Double(next.delay.nanoseconds)).rounded())),
            Probability(mix(step.loss.value, next.loss.value))
        )
    }

    /// When `bytes` that start onto the wire at `head` have left it: the rate may change while they
    /// go (a row's end), and each part goes at the rate of its moment, as a shaper's tokens come at
    /// the rate in force (between interpolated rows, in sixteenths of the gap).
    public func departure(bytes: Int, startingAt head: Instant) -> Instant {
        var remaining = Double(max(1, bytes) * 8)
        var t = head
        for _ in 0..<100_000 {
            let rate = Double(self.conditions(at: t).rate.bitsPerSecond)
            guard let until = self.pieceEnd(after: t), until > t else {
                return t + Span(nanoseconds: Int64((remaining / rate * 1e9).rounded(.up)))
            }
            let capacity = rate * (until - t).seconds
            if capacity >= remaining {
                return t + Span(nanoseconds: Int64((remaining / rate * 1e9).rounded(.up)))
            }
            remaining -= capacity
            t = until
        }
        return t
    }

    /// Until when the rate in force at `t` holds (nil: from then on).
    private func pieceEnd(after t: Instant) -> Instant? {
        let steps = self.steps
        let since = Span(nanoseconds: max(0, t.nanoseconds))
        let cycleStart =
            self.period.map { Span(nanoseconds: since.nanoseconds / $0.nanoseconds * $0.nanoseconds) } ?? .zero
        let within = since - cycleStart
        var low = 0
        var high = steps.count
        while low + 1 < high {
            let middle = (low + high) / 2
            if steps[middle].at <= within { low = middle } else { high = middle }
        }
        let rowEnd: Span
        if low + 1 < steps.count {
            rowEnd = steps[low + 1].at
        } else if let period = self.period {
            rowEnd = period
        } else {
            return nil
        }
        var end = cycleStart + rowEnd
        if self.interpolates {
            let sixteenth = Span(nanoseconds: max(1, (rowEnd - steps[low].at).nanoseconds / 16))
            end = min(end, since + sixteenth)
        }
        return Instant(nanoseconds: end.nanoseconds)
    }

    // MARK: - Reading

    /// The most rows a series may have (checked as they are read, not after).
    public static let maximumRows = 1_000_000

    /// Whether text looks like a step series rather than a list of opportunity times.
    public static func looksLikeSeries(_ text: String) -> Bool {
        text.textLines.contains { line in
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            return content.contains(",")
        }
    }

    /// The text form, one row per line (or rows separated by `;`, the inline form, whose
    /// directives come as `period` and `interpolates`).
    public static func parse(
        _ text: String, source: String, path: String = "", period givenPeriod: Span? = nil,
        interpolates givenInterpolates: Bool? = nil
    ) throws(LinkTrace.ReadError) -> LinkSeries {
        // Before the work: reading a million rows takes a while, and a file past the limit is refused at once.
        let counted = Self.rowCount(text, stoppingAfter: Self.maximumRows + 1)
        guard counted <= Self.maximumRows + 1 else {  // + 1: a header row
            throw LinkTrace.ReadError(
                line: 0, message: "more than \(Self.maximumRows) rows; allowed: up to \(Self.maximumRows)")
        }
        var steps: [Step] = []
        var period = givenPeriod
        var interpolates = givenInterpolates ?? false
        var lineNumber = 0
        for line in text.textLines {
            lineNumber += 1
            var rows = Substring(line)
            if let hash = line.firstIndex(of: "#") {
                try Self.directive(
                    line[line.index(after: hash)...], line: lineNumber, period: &period, interpolates: &interpolates)
                rows = line[..<hash]
            }
            for content in rows.split(separator: ";", omittingEmptySubsequences: false) {
                let fields = content.split(separator: ",", omittingEmptySubsequences: false).map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                if fields.count == 1 && fields[0].isEmpty { continue }
                if steps.isEmpty && fields.first?.lowercased() == "t" { continue }  // a header row
                guard steps.count < Self.maximumRows else {
                    throw LinkTrace.ReadError(
                        line: lineNumber,
                        message: "more than \(Self.maximumRows) rows; allowed: up to \(Self.maximumRows)")
                }
                steps.append(try Self.step(fields, line: lineNumber, after: steps.last))
            }
        }
        guard let first = steps.first else {
            throw LinkTrace.ReadError(
                line: 0, message: "no row in the series; a row is t, rate, delay, loss (e.g. 0, 8mbit, 20ms, 0%)")
        }
        guard first.at == .zero else {
            throw LinkTrace.ReadError(line: 0, message: "the first row is at \(first.at); a series starts at t = 0")
        }
        if let period, let last = steps.last, period <= last.at {
            throw LinkTrace.ReadError(
                line: 0,
                message:
                    "repeat: \(period) is not after the last row (\(last.at)); it is how long the series lasts before it starts over"
            )
        }
        return LinkSeries(steps: steps, period: period, interpolates: interpolates, source: source, path: path)
    }

    /// The rows `text` holds, at least (pieces between line ends and `;` with a comma before any
    /// `#`), counted up to just past `limit`: a byte scan, far quicker than reading them.
    static func rowCount(_ text: String, stoppingAfter limit: Int) -> Int {
        var rows = 0
        var comma = false
        var comment = false
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                if comma { rows += 1 }
                comma = false
                comment = false
            case UInt8(ascii: ";") where !comment:
                if comma { rows += 1 }
                comma = false
            case UInt8(ascii: "#"):
                comment = true
            case UInt8(ascii: ",") where !comment:
                comma = true
            default:
                continue
            }
            if rows > limit { return rows }
        }
        return rows + (comma ? 1 : 0)
    }

    private static func directive(_ comment: Substring, line: Int, period: inout Span?, interpolates: inout Bool)
        throws(LinkTrace.ReadError)
    {
        let parts = comment.split(separator: ":", maxSplits: 1).map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        guard parts.count == 2 else { return }  // a plain comment
        switch parts[0] {
        case "repeat":
            guard let value = try? Span.parse(parts[1]), value > .zero, value <= .seconds(Int64(86_400)) else {
                throw LinkTrace.ReadError(
                    line: line, message: "repeat: '\(parts[1])' is not a duration from 1ms to 24h (e.g. repeat: 60s)")
            }
            period = value
        case "interpolate":
            guard parts[1] == "linear" || parts[1] == "step" else {
                throw LinkTrace.ReadError(line: line, message: "interpolate: '\(parts[1])'; allowed: linear, step")
            }
            interpolates = parts[1] == "linear"
        default:
            return
        }
    }

    private static func step(_ fields: [String], line: Int, after previous: Step?) throws(LinkTrace.ReadError) -> Step {
        guard fields.count == 4 else {
            throw LinkTrace.ReadError(
                line: line, message: "\(fields.count) fields; a row is t, rate, delay, loss (e.g. 1.5, 2mbit, 40ms, 1%)"
            )
        }
        let at: Span
        let week = Span.seconds(Int64(7 * 86_400))
        if let seconds = Double(fields[0]) {
            // Checked before it becomes nanoseconds: 1e10 s does not fit in them.
            guard seconds.isFinite, seconds >= 0, let span = Span.seconds(exactly: seconds), span <= week else {
                throw LinkTrace.ReadError(
                    line: line,
                    message:
                        "t '\(TerminalText.quoted(fields[0]))' is out of range; allowed: seconds since the start, 0 up to 604800 (7 days)"
                )
            }
            at = span
        } else if let span = try? Span.parse(fields[0]) {
            at = span
        } else {
            throw LinkTrace.ReadError(
                line: line,
                message:
                    "t '\(TerminalText.quoted(fields[0]))' is not a time; allowed: seconds since the start (e.g. 1.5) or a duration (e.g. 1500ms)"
            )
        }
        if let previous, at <= previous.at {
            throw LinkTrace.ReadError(
                line: line, message: "t \(at) is not after the row before (\(previous.at)); rows go forward in time")
        }
        guard at <= week else {
            throw LinkTrace.ReadError(line: line, message: "t \(at) is more than a week; allowed: up to 7 days")
        }
        let rate: Bandwidth
        do {
            rate = try Bandwidth.parse(fields[1])
        } catch {
            throw LinkTrace.ReadError(
                line: line,
                message:
                    "rate '\(TerminalText.quoted(fields[1]))': \(error); allowed: 1bit…100Gbit (e.g. 2mbit; for no delivery use loss 100%)"
            )
        }
        guard rate.bitsPerSecond > 0, rate.bitsPerSecond <= 100_000_000_000 else {
            throw LinkTrace.ReadError(
                line: line,
                message:
                    "rate '\(TerminalText.quoted(fields[1]))' is out of range; allowed: above 0 up to 100Gbit (for an outage use loss 100%)"
            )
        }
        let delay: Span
        do {
            delay = try Span.parse(fields[2])
        } catch {
            throw LinkTrace.ReadError(
                line: line,
                message:
                    "delay '\(TerminalText.quoted(fields[2]))': \(error); allowed: a one-way delay 0…1h (e.g. 40ms)")
        }
        guard delay <= .seconds(Int64(3600)) else {
            throw LinkTrace.ReadError(
                line: line, message: "delay '\(TerminalText.quoted(fields[2]))' is more than 1 hour; allowed: 0…1h")
        }
        let loss: Probability
        do {
            loss = try Probability.parse(fields[3])
        } catch {
            throw LinkTrace.ReadError(
                line: line, message: "loss '\(TerminalText.quoted(fields[3]))': \(error); allowed: 0%…100% (e.g. 1%)")
        }
        return Step(at: at, rate: rate, delay: delay, loss: loss)
    }

    /// The rows as one line of text, separated by `;` (``parse`` reads it back, given the period
    /// and the interpolation).
    public var inlineText: String {
        self.steps.map {
            "\($0.at.nanoseconds)ns, \($0.rate.bitsPerSecond)bit, \($0.delay.nanoseconds)ns, \(String(format: "%.12f", $0.loss.value * 100))%"
        }.joined(separator: ";")
    }
}
