import Foundation

/// What a `trace:` file holds: delivery opportunities (mahimahi's format) or a step series of
/// rate, delay and loss (netcond's own, told apart by its commas).
public enum TraceFile: Sendable, Equatable {
    case opportunities(LinkTrace)
    case series(LinkSeries)

    /// Reads either kind (refusing a file over ``LinkTrace/maximumFileBytes`` before reading it).
    public static func read(path: String, source: String) throws(LinkTrace.ReadError) -> TraceFile {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        guard let size = attributes?[.size] as? Int else {
            throw LinkTrace.ReadError(line: 0, message: "cannot read the trace file")
        }
        guard size <= LinkTrace.maximumFileBytes else {
            throw LinkTrace.ReadError(
                line: 0,
                message:
                    "the file is \(size >> 20) MB; allowed: trace files up to \(LinkTrace.maximumFileBytes >> 20) MB")
        }
        let absolute =
            ((path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path) as NSString)
            .standardizingPath
        // Most traces are plain: read without holding their text (a 5-million-line trace is 40 MB of it).
        if let trace = try LinkTrace.readPlain(path: path, source: source, absolute: absolute) {
            return .opportunities(trace)
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else {
            throw LinkTrace.ReadError(line: 0, message: "cannot read the trace file as text")
        }
        if LinkSeries.looksLikeSeries(text) {
            return .series(try LinkSeries.parse(text, source: source, path: absolute))
        }
        return .opportunities(try LinkTrace.parse(text, source: source, path: absolute))
    }
}

/// A link rate that moves as a measured one did: mahimahi's trace format, so existing traces run
/// unchanged. Each line is one delivery opportunity, in milliseconds since the trace began, for up
/// to ``opportunityBytes`` bytes; lines with the same time are that many opportunities at once; the
/// file repeats when it ends, its last line's time being its period.
///
/// ```
///  trace:  1 1 2 5 5 5 8            (period 8 ms)
///  link:   ▮▮ ▮  .  ▮▮▮  .  ▮ │ ▮▮ ▮ …   the run's clock starts at 0; opportunity k of
///          0 1 2 3 4 5 6 7 8 9 10 ms    cycle c is at c·8 ms + its time
/// ```
/// An opportunity nothing waits for is lost (a cell's scheduler slot that went unused), so a trace
/// limits the rate without ever letting a sender catch up on the slots it left.
public struct LinkTrace: Sendable, Equatable, CustomStringConvertible {
    /// Bytes one opportunity carries (mahimahi's packet of the trace's link).
    public static let opportunityBytes = 1_500
    /// The most lines a trace may have (about 100 MB of text is refused before it is read).
    public static let maximumLines = 5_000_000
    public static let maximumFileBytes = 64 << 20

    /// Where it came from (the file as the user named it).
    public let source: String
    /// The file read, as a path that reads back from anywhere (empty for a trace made in code).
    public let path: String
    /// Opportunity times within one period, in milliseconds, not decreasing.
    private let storage: Storage
    /// The period: the last line's time.
    public var periodMilliseconds: Int64 { self.storage.times.last ?? 0 }
    public var opportunityCount: Int { self.storage.times.count }

    private final class Storage: Sendable {
        let times: Times
        init(_ times: Times) { self.times = times }
    }

    /// The times, 4 bytes each while they fit (a trace shorter than 49 days: a 5-million-line
    /// trace takes 20 MB, not 40), else 8.
    struct Times: RandomAccessCollection, Sendable {
        var narrow: [UInt32] = []
        var wide: [Int64] = []
        var startIndex: Int { 0 }
        var endIndex: Int { self.wide.isEmpty ? self.narrow.count : self.wide.count }
        subscript(index: Int) -> Int64 { self.wide.isEmpty ? Int64(self.narrow[index]) : self.wide[index] }

        init(reserving capacity: Int = 0) { self.narrow.reserveCapacity(capacity) }

        init(_ times: [Int64]) {
            if times.allSatisfy({ $0 >= 0 && $0 <= Int64(UInt32.max) }) {
                self.narrow = times.map { UInt32($0) }
            } else {
                self.wide = times
            }
        }

        mutating func append(_ time: Int64) {
            if self.wide.isEmpty, time >= 0, let narrow = UInt32(exactly: time) {
                self.narrow.append(narrow)
                return
            }
            if self.wide.isEmpty {
                self.wide = self.narrow.map(Int64.init)
                self.narrow = []
            }
            self.wide.append(time)
        }
    }

    /// A trace of these opportunity times (milliseconds, not decreasing, the last above 0).
    public init(milliseconds times: [Int64], source: String, path: String = "") {
        self.init(times: Times(times), source: source, path: path)
    }

    init(times: Times, source: String, path: String = "") {
        precondition(!times.isEmpty && times.last! > 0, "a trace needs a positive period")
        self.source = source
        self.path = path
        self.storage = Storage(times)
    }

    public static func == (a: LinkTrace, b: LinkTrace) -> Bool {
        a.storage === b.storage || (a.source == b.source && a.storage.times.elementsEqual(b.storage.times))
    }

    /// The mean rate the trace allows: every opportunity used.
    public var meanRate: Bandwidth {
        let bits = Double(self.opportunityCount * Self.opportunityBytes * 8)
        return Bandwidth(bitsPerSecond: Int64(bits / (Double(self.periodMilliseconds) / 1_000)))
    }

    public var description: String {
        "trace \(self.source) (\(self.opportunityCount) opportunities in \(self.periodMilliseconds) ms, mean \(self.meanRate))"
    }

    /// The opportunity times as one line of text, separated by spaces (``parse`` reads it back).
    public var millisecondsText: String {
        self.storage.times.map(String.init).joined(separator: " ")
    }

    /// True when the trace's times are `times`, in order (no text made of either).
    public func hasTimes(_ times: some Sequence<Int64>) -> Bool {
        self.storage.times.elementsEqual(times)
    }

    // MARK: - Opportunities

    /// One opportunity: the cycle of the file and the line within it.
    public struct Opportunity: Sendable, Equatable {
        var cycle: Int64
        var index: Int
    }

    /// When an opportunity comes.
    public func time(of opportunity: Opportunity) -> Instant {
        let ms = opportunity.cycle * self.periodMilliseconds + self.storage.times[opportunity.index]
        return Instant(nanoseconds: ms * 1_000_000)
    }

    /// The first opportunity at or after `moment`.
    public func first(atOrAfter moment: Instant) -> Opportunity {
        let period = self.periodMilliseconds
        // Milliseconds, rounded up: an opportunity at an exact millisecond is at or after `moment`.
        let ms = max(0, (moment.nanoseconds + 999_999) / 1_000_000)
        let cycle = ms / period
        let within = ms - cycle * period
        // The last lines of a cycle are at its period: they come at the next cycle's moment 0.
        if within == 0 && cycle > 0 {
            return Opportunity(cycle: cycle - 1, index: self.firstIndex(atOrAfter: period))
        }
        let index = self.firstIndex(atOrAfter: within)
        return index < self.opportunityCount
            ? Opportunity(cycle: cycle, index: index) : Opportunity(cycle: cycle + 1, index: 0)
    }

    /// The first line whose time is at least `ms` (the count when none is).
    private func firstIndex(atOrAfter ms: Int64) -> Int {
        let times = self.storage.times
        var low = 0
        var high = times.count
        while low < high {
            let middle = (low + high) / 2
            if times[middle] < ms { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// How many opportunities come in [`start`, `end`), counted from their places in the file (no
    /// walk: a 100 Gbit/s trace has 833,333 in 100 ms).
    public func count(from start: Instant, to end: Instant) -> Int64 {
        guard end > start else { return 0 }
        let first = self.first(atOrAfter: start)
        let last = self.first(atOrAfter: end)
        return (last.cycle - first.cycle) * Int64(self.opportunityCount) + Int64(last.index - first.index)
    }

    /// The opportunity after `opportunity`.
    public func next(after opportunity: Opportunity) -> Opportunity {
        opportunity.index + 1 < self.opportunityCount
            ? Opportunity(cycle: opportunity.cycle, index: opportunity.index + 1)
            : Opportunity(cycle: opportunity.cycle + 1, index: 0)
    }

    // MARK: - Reading

    /// Why a trace file cannot be used, and where.
    public struct ReadError: Error, Sendable, Equatable {
        public var line: Int
        public var message: String
    }

    /// Reads mahimahi's format: one non-negative whole number of milliseconds per line, not
    /// decreasing; blank lines and `#` comments are skipped.
    public static func parse(_ text: String, source: String, path: String = "") throws(ReadError) -> LinkTrace {
        var builder = Builder()
        var lineNumber = 0
        for line in text.textLines {
            lineNumber += 1
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            // One time per line; a line of several (the inline form, `1 1 2 5`) is read in order.
            for field in content.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init) {
                try builder.add(field, line: lineNumber)
            }
        }
        return try builder.trace(lines: lineNumber, source: source, path: path)
    }

    /// The times read so far, each field checked as it comes.
    struct Builder {
        var times: Times
        var burst = 0

        init(reserving capacity: Int = 0) { self.times = Times(reserving: capacity) }

        mutating func add(_ field: String, line lineNumber: Int) throws(ReadError) {
            guard let value = Int64(field), value >= 0 else {
                throw ReadError(
                    line: lineNumber,
                    message:
                        "'\(TerminalText.quoted(field))' is not a time; allowed: one whole number of milliseconds (0 or more) per line, as mahimahi's traces"
                )
            }
            guard value <= 365 * 86_400_000 else {
                throw ReadError(
                    line: lineNumber, message: "\(value) ms is more than a year; allowed: times up to 31536000000 ms")
            }
            if let last = self.times.last, value < last {
                throw ReadError(
                    line: lineNumber,
                    message: "\(value) comes after \(last): a trace's times never go back; sort the file (sort -n)")
            }
            // Opportunities at one moment that would carry an absurd rate are a mistake (a trace
            // in microseconds, say): more than 100 Gbit/s over a millisecond (12.5 MB, 8,333
            // opportunities) is refused.
            self.burst = value == self.times.last ? self.burst + 1 : 1
            guard self.burst <= 8_333 else {
                throw ReadError(
                    line: lineNumber,
                    message:
                        "more than 8333 opportunities at \(value) ms carry over 100 Gbit/s; is the file in milliseconds?"
                )
            }
            guard self.times.count < LinkTrace.maximumLines else {
                throw ReadError(
                    line: lineNumber,
                    message:
                        "more than \(LinkTrace.maximumLines) opportunities; allowed: up to \(LinkTrace.maximumLines) lines"
                )
            }
            self.times.append(value)
        }

        /// The trace of a text of `lines` lines.
        func trace(lines lineNumber: Int, source: String, path: String) throws(ReadError) -> LinkTrace {
            let times = self.times
            guard let last = times.last else {
                throw ReadError(
                    line: 0,
                    message:
                        "no opportunity in the file; a trace holds one time in milliseconds per line (e.g. 1, 1, 2, 5)")
            }
            guard last > 0 else {
                throw ReadError(
                    line: lineNumber,
                    message:
                        "every time is 0, so the trace has no period; its last line's time is how long it lasts before it repeats"
                )
            }
            return LinkTrace(times: times, source: source, path: path)
        }
    }

}
