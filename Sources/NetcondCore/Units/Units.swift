import Foundation

/// Typed units for everything a profile or the link model talks about.
///
/// Code never holds a bare `Int` "in milliseconds": it holds one of these. Parsing from the human
/// forms used in YAML (`240kbit`, `64KB`, `400ms`, `1%`) lives in `UnitParsing.swift`.

/// A point in (virtual or real) time, in nanoseconds since an arbitrary epoch owned by the driver.
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    @inlinable
    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    public static let zero = Instant(nanoseconds: 0)
    /// Later than any instant a run reaches (about 146 years); never overflows when a span is added.
    public static let distantFuture = Instant(nanoseconds: .max / 2)

    @inlinable public static func < (lhs: Instant, rhs: Instant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    @inlinable public static func + (lhs: Instant, rhs: Span) -> Instant {
        Instant(nanoseconds: lhs.nanoseconds &+ rhs.nanoseconds)
    }

    @inlinable public static func - (lhs: Instant, rhs: Span) -> Instant {
        Instant(nanoseconds: lhs.nanoseconds &- rhs.nanoseconds)
    }

    @inlinable public static func - (lhs: Instant, rhs: Instant) -> Span {
        Span(nanoseconds: lhs.nanoseconds &- rhs.nanoseconds)
    }

    public var description: String {
        "t+\(Span(nanoseconds: self.nanoseconds))"
    }
}

/// A length of time, in nanoseconds. (Swift's `Duration` is 128-bit and slow on the hot path.)
public struct Span: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    @inlinable
    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    public static let zero = Span(nanoseconds: 0)

    @inlinable public static func nanoseconds(_ n: Int64) -> Span { Span(nanoseconds: n) }
    @inlinable public static func microseconds(_ n: Int64) -> Span { Span(nanoseconds: n * 1_000) }
    @inlinable public static func milliseconds(_ n: Int64) -> Span { Span(nanoseconds: n * 1_000_000) }
    @inlinable public static func seconds(_ n: Int64) -> Span { Span(nanoseconds: n * 1_000_000_000) }
    @inlinable public static func seconds(double s: Double) -> Span { Span(nanoseconds: Int64((s * 1e9).rounded())) }
    /// `s` seconds, or nil when that is not a finite number of nanoseconds an `Int64` holds (about
    /// ±292 years): the checked form for numbers read from outside, whose range the caller states.
    public static func seconds(exactly s: Double) -> Span? {
        Int64(exactly: (s * 1e9).rounded()).map(Span.init(nanoseconds:))
    }

    public var seconds: Double { Double(self.nanoseconds) / 1e9 }
    public var milliseconds: Double { Double(self.nanoseconds) / 1e6 }

    @inlinable public static func < (lhs: Span, rhs: Span) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
    @inlinable public static func + (lhs: Span, rhs: Span) -> Span {
        Span(nanoseconds: lhs.nanoseconds + rhs.nanoseconds)
    }
    @inlinable public static func - (lhs: Span, rhs: Span) -> Span {
        Span(nanoseconds: lhs.nanoseconds - rhs.nanoseconds)
    }
    @inlinable public static func * (lhs: Span, rhs: Int64) -> Span { Span(nanoseconds: lhs.nanoseconds * rhs) }
    public func scaled(by factor: Double) -> Span {
        Span(nanoseconds: Int64((Double(self.nanoseconds) * factor).rounded()))
    }

    /// Human form, the one the YAML accepts: `0ms`, `1.5ms`, `400ms`, `2s`, `250us`.
    public var description: String {
        let ns = self.nanoseconds
        if ns == 0 { return "0ms" }
        if ns % 1_000_000_000 == 0 { return "\(ns / 1_000_000_000)s" }
        if ns % 1_000_000 == 0 { return "\(ns / 1_000_000)ms" }
        if ns % 1_000 == 0 && abs(ns) < 1_000_000 { return "\(ns / 1_000)us" }
        return "\(formatTrimmed(Double(ns) / 1e6))ms"
    }
}

/// An amount of data, in bytes.
public struct ByteCount: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var bytes: Int64

    public init(bytes: Int64) {
        self.bytes = bytes
    }

    public static let zero = ByteCount(bytes: 0)

    public static func < (lhs: ByteCount, rhs: ByteCount) -> Bool { lhs.bytes < rhs.bytes }

    /// Human form with binary multiples, the one the YAML accepts: `1500B`, `64KB`, `1.5MB`.
    public var description: String {
        let b = self.bytes
        if b >= 1 << 30 && b % (1 << 20) == 0 { return "\(formatTrimmed(Double(b) / Double(1 << 30)))GB" }
        if b >= 1 << 20 && b % (1 << 10) == 0 { return "\(formatTrimmed(Double(b) / Double(1 << 20)))MB" }
        if b >= 1 << 10 && b % (1 << 7) == 0 { return "\(formatTrimmed(Double(b) / Double(1 << 10)))KB" }
        return "\(b)B"
    }
}

/// A link rate, in bits per second.
public struct Bandwidth: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var bitsPerSecond: Int64

    public init(bitsPerSecond: Int64) {
        self.bitsPerSecond = bitsPerSecond
    }

    public static func kbit(_ k: Double) -> Bandwidth { Bandwidth(bitsPerSecond: Int64((k * 1e3).rounded())) }
    public static func mbit(_ m: Double) -> Bandwidth { Bandwidth(bitsPerSecond: Int64((m * 1e6).rounded())) }

    public static func < (lhs: Bandwidth, rhs: Bandwidth) -> Bool { lhs.bitsPerSecond < rhs.bitsPerSecond }

    /// Time this rate needs to carry `bytes` bytes.
    public func transmissionTime(bytes: Int64) -> Span {
        // ns = bytes * 8 * 1e9 / bps, computed without overflow for any realistic size.
        let bits = Double(bytes) * 8
        return Span(nanoseconds: Int64((bits * 1e9 / Double(self.bitsPerSecond)).rounded(.up)))
    }

    /// Human form with decimal multiples, the one the YAML accepts: `240kbit`, `1.5Mbit`, `1Gbit`.
    public var description: String {
        let b = self.bitsPerSecond
        if b >= 1_000_000_000 { return "\(formatTrimmed(Double(b) / 1e9))Gbit" }
        if b >= 1_000_000 { return "\(formatTrimmed(Double(b) / 1e6))Mbit" }
        if b >= 1_000 { return "\(formatTrimmed(Double(b) / 1e3))kbit" }
        return "\(b)bit"
    }
}

/// A probability in 0...1. YAML writes it as a percentage (`1%`, `0.5%`) or a fraction (`0.01`).
public struct Probability: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var value: Double

    public init(_ value: Double) {
        precondition(value >= 0 && value <= 1, "probability out of range: \(value)")
        self.value = value
    }

    public static let zero = Probability(0)
    public static let one = Probability(1)

    public static func < (lhs: Probability, rhs: Probability) -> Bool { lhs.value < rhs.value }

    public var description: String { "\(formatTrimmed(self.value * 100))%" }
}

/// Formats a number with at most three decimals and no trailing zeros: 1.5, 0.125, 2.
func formatTrimmed(_ value: Double) -> String {
    var text = String(format: "%.3f", value)
    while text.hasSuffix("0") { text.removeLast() }
    if text.hasSuffix(".") { text.removeLast() }
    return text
}

extension Instant {
    /// The earlier of two moments, either of which may be missing (nil: neither).
    @inlinable
    public static func earliest(_ a: Instant?, _ b: Instant?) -> Instant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }
}
