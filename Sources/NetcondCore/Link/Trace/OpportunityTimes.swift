/// A recorded trace's opportunity times (milliseconds, not decreasing), held compactly: one run per
/// distinct millisecond (its distance from the previous run's and how many opportunities it has),
/// each number a LEB128 varint. A saturating download of 4 million packets at ~8 a millisecond
/// holds about 2 bytes per millisecond, not 8 per opportunity.
///
/// ```
///  times:  0 1 3 3 3 3 3 3 9      runs: (+0 ×1) (+1 ×1) (+2 ×6) (+6 ×1)     bytes: 00 00 01 00 02 05 06 00
/// ```
public struct OpportunityTimes: Sendable, Equatable, Sequence {
    private var bytes: [UInt8] = []
    /// The run still open: its time and count (written when a later time comes, or on reading).
    private var runTime: Int64 = 0
    private var runCount: Int = 0
    /// The time of the last run written.
    private var written: Int64 = 0
    public private(set) var count = 0
    public private(set) var last: Int64?

    public init() {}

    public init(_ times: [Int64]) {
        for time in times { self.append(time) }
    }

    /// Adds one opportunity at `time` (at or after the last one; clamped to it otherwise).
    public mutating func append(_ time: Int64) {
        let time = Swift.max(time, self.last ?? 0)
        self.count += 1
        self.last = time
        if self.runCount > 0 && time == self.runTime {
            self.runCount += 1
            return
        }
        self.closeRun()
        self.runTime = time
        self.runCount = 1
    }

    private mutating func closeRun() {
        guard self.runCount > 0 else { return }
        Self.put(UInt64(self.runTime - self.written), into: &self.bytes)
        Self.put(UInt64(self.runCount - 1), into: &self.bytes)
        self.written = self.runTime
        self.runCount = 0
    }

    private static func put(_ value: UInt64, into bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    // MARK: Reading

    public struct Iterator: IteratorProtocol {
        let bytes: [UInt8]
        var at = 0
        var time: Int64 = 0
        var left = 0
        let openTime: Int64
        var openLeft: Int

        public mutating func next() -> Int64? {
            if self.left > 0 {
                self.left -= 1
                return self.time
            }
            if self.at < self.bytes.count {
                self.time += Int64(truncatingIfNeeded: self.varint())
                self.left = Int(truncatingIfNeeded: self.varint())
                return self.time
            }
            guard self.openLeft > 0 else { return nil }
            self.openLeft -= 1
            return self.openTime
        }

        private mutating func varint() -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while self.at < self.bytes.count {
                let byte = self.bytes[self.at]
                self.at += 1
                if shift < 64 { value |= UInt64(byte & 0x7F) << shift }
                shift += 7
                if byte & 0x80 == 0 { break }
            }
            return value
        }
    }

    public func makeIterator() -> Iterator {
        Iterator(bytes: self.bytes, openTime: self.runTime, openLeft: self.runCount)
    }

    public var underestimatedCount: Int { self.count }

    // MARK: As a trace

    /// The period: the last time.
    public var periodMilliseconds: Int64 { self.last ?? 0 }

    /// The mean rate, every opportunity used (as ``LinkTrace/meanRate``).
    public var meanRate: Bandwidth {
        let bits = Double(self.count * LinkTrace.opportunityBytes * 8)
        return Bandwidth(bitsPerSecond: Int64(bits / (Double(self.periodMilliseconds) / 1_000)))
    }

    /// The times as one line, separated by spaces (as ``LinkTrace/millisecondsText``).
    public var millisecondsText: String { self.map(String.init).joined(separator: " ") }

    /// The trace these times make (tests, small traces: it holds 8 bytes per opportunity).
    public var linkTrace: LinkTrace { LinkTrace(milliseconds: Array(self), source: "recorded") }

    /// The trace file's text, in pieces of about `size` bytes, one line per opportunity.
    public func fileText(piecesOf size: Int = 1 << 16, _ body: (String) throws -> Void) rethrows {
        var piece = ""
        piece.reserveCapacity(size + 32)
        for time in self {
            piece += String(time)
            piece += "\n"
            if piece.utf8.count >= size {
                try body(piece)
                piece.removeAll(keepingCapacity: true)
            }
        }
        if !piece.isEmpty { try body(piece) }
    }
}
