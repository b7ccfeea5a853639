import Foundation

/// Parsing of the human unit forms that profiles and scenarios are written in.
///
/// Strict on purpose: a number without a unit (other than `0` for a duration) is an error, and so
/// is every form that reads two ways (`kb`: kilobytes or kilobits?). Every rejection says what was
/// wrong, what is allowed and gives an example, so a user can fix the file without the manual.
///
/// ```
///   duration     0 | 250us | 400ms | 1.5s | 2s | 1m | 1h          (also ns, µs)
///   byte size    1500B | 64KB | 1.5MB | 1GB | 64KiB | 1MiB       (binary: 1KB = 1024B)
///   bandwidth    240kbit | 1.5Mbit | 1Gbit | 64kbps | 2Mbps      (decimal: 1kbit = 1000 bit/s)
///   probability  1% | 0.5% | 100% | 0.01                          (a fraction below 1)
/// ```

/// A value that could not be read in its unit; `message` says what was wrong and what is allowed.
public struct UnitParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Which kind of quantity was expected.
    public enum Quantity: String, Sendable, Equatable {
        case duration
        case byteCount = "byte size"
        case bandwidth
        case probability
    }

    public var quantity: Quantity
    /// The text as written.
    public var input: String
    /// What was wrong, what is allowed, an example.
    public var message: String

    public init(quantity: Quantity, input: String, message: String) {
        self.quantity = quantity
        self.input = input
        self.message = message
    }

    public var description: String { self.message }
}

// MARK: - Allowed forms, as told to users

extension UnitParseError.Quantity {
    /// The sentence that lists the allowed forms, used at the end of every error message.
    public var allowedForms: String {
        switch self {
        case .duration:
            return "allowed: a number with a unit ns, us, ms, s, m (minutes) or h, or 0 (e.g. 400ms, 1.5s, 2m)"
        case .byteCount:
            return "allowed: a number with a unit B, KB, MB, GB (binary, 1KB = 1024B) or KiB, MiB, GiB "
                + "(e.g. 1500B, 64KB, 1.5MB)"
        case .bandwidth:
            return "allowed: a number with a unit bit, kbit, Mbit, Gbit or bps, kbps, Mbps, Gbps "
                + "(decimal, 1kbit = 1000 bit/s; e.g. 240kbit, 1.5Mbit)"
        case .probability:
            return "allowed: a percentage 0%…100% (e.g. 1%) or a fraction 0…1 (e.g. 0.01)"
        }
    }
}

// MARK: - Public entry points

extension Span {
    /// Parses `0`, `250us`, `400ms`, `1.5s`, `1m` (minute), `1h`; also `ns` and `µs`.
    public static func parse(_ text: String) throws(UnitParseError) -> Span {
        let quantity = UnitParseError.Quantity.duration
        let (number, unit) = try UnitParser.split(text, quantity)
        let multiplier: Double
        switch unit {
        case "":
            guard number.value == 0 else {
                throw UnitParser.error(quantity, text, "'\(text.trimmed)' has no unit")
            }
            return .zero
        case "ns": multiplier = 1
        case "us", "µs", "μs": multiplier = 1e3
        case "ms": multiplier = 1e6
        case "s": multiplier = 1e9
        case "m", "min": multiplier = 60e9
        case "h": multiplier = 3600e9
        case "sec", "secs", "second", "seconds":
            throw UnitParser.error(quantity, text, "unknown unit '\(unit)'; did you mean s?")
        case "mins", "minute", "minutes":
            throw UnitParser.error(quantity, text, "unknown unit '\(unit)'; did you mean m?")
        case "M", "mS", "MS", "Ms":
            throw UnitParser.error(
                quantity, text, "unknown unit '\(unit)'; did you mean ms (milliseconds) or m (minutes)?"
            )
        default:
            throw UnitParser.error(quantity, text, "unknown unit '\(unit)'")
        }
        let nanoseconds = try UnitParser.scale(number, multiplier, quantity, text)
        return Span(nanoseconds: nanoseconds)
    }
}

extension ByteCount {
    /// Parses `1500B`, `64KB`, `1.5MB`, `1GB`, `64KiB`, `1MiB` (binary multiples: 1KB = 1024B).
    ///
    /// The prefix letter may be either case (`kB` = `KB`), but a lowercase `b` after a prefix is
    /// rejected: `kb` reads as kilobits as often as kilobytes.
    public static func parse(_ text: String) throws(UnitParseError) -> ByteCount {
        let quantity = UnitParseError.Quantity.byteCount
        let (number, unit) = try UnitParser.split(text, quantity)
        let multiplier: Double
        switch unit {
        case "B": multiplier = 1
        case "KB", "kB", "KiB", "kiB": multiplier = 1024
        case "MB", "mB", "MiB": multiplier = 1024 * 1024
        case "GB", "gB", "GiB": multiplier = 1024 * 1024 * 1024
        case "":
            throw UnitParser.error(quantity, text, "'\(text.trimmed)' has no unit")
        case "b":
            throw UnitParser.error(quantity, text, "'b' is ambiguous (bits or bytes?); did you mean B (bytes)?")
        default:
            if let prefix = UnitParser.prefixOfLowercaseB(unit) {
                throw UnitParser.error(
                    quantity, text,
                    "'\(unit)' is ambiguous; did you mean \(prefix.uppercased())B (bytes) or \(prefix)bit (bits)?"
                )
            }
            if UnitParser.isBitRateUnit(unit) {
                throw UnitParser.error(quantity, text, "'\(unit)' is a rate in bits; this is a size in bytes")
            }
            throw UnitParser.error(quantity, text, "unknown unit '\(unit)'")
        }
        let bytes = try UnitParser.scale(number, multiplier, quantity, text)
        return ByteCount(bytes: bytes)
    }
}

extension Bandwidth {
    /// Parses `240kbit`, `1.5Mbit`, `1Gbit`, `64kbps`, `2Mbps` (decimal: 1kbit = 1000 bit/s), and
    /// `0` (so that a caller can say why a zero rate is wrong).
    ///
    /// Byte rates (`MB/s`, `KBps`) are rejected with the equivalent in bits.
    public static func parse(_ text: String) throws(UnitParseError) -> Bandwidth {
        let quantity = UnitParseError.Quantity.bandwidth
        let (number, unit) = try UnitParser.split(text, quantity)
        let multiplier: Double
        switch unit {
        case "":
            guard number.value == 0 else {
                throw UnitParser.error(quantity, text, "'\(text.trimmed)' has no unit")
            }
            return Bandwidth(bitsPerSecond: 0)
        case "bit", "bit/s", "bps": multiplier = 1
        case "kbit", "Kbit", "kbit/s", "Kbit/s", "kbps", "Kbps": multiplier = 1e3
        case "Mbit", "mbit", "Mbit/s", "mbit/s", "Mbps", "mbps": multiplier = 1e6
        case "Gbit", "gbit", "Gbit/s", "gbit/s", "Gbps", "gbps": multiplier = 1e9
        default:
            let bytesPerUnit = UnitParser.byteRateMultiplier(unit)
            if bytesPerUnit > 0 {
                let bits = min(number.value * bytesPerUnit * 8, 1e15).rounded()
                let equivalent = Bandwidth(bitsPerSecond: Int64(bits))
                throw UnitParser.error(
                    quantity, text,
                    "'\(unit)' is a rate in bytes; bandwidth is written in bits: use \(equivalent) for "
                        + "\(number.text)\(unit) (e.g. 8Mbit for 1MB/s)"
                )
            }
            let stem = unit.hasSuffix("/s") ? String(unit.dropLast(2)) : unit
            if let prefix = UnitParser.prefixOfLowercaseB(stem) {
                throw UnitParser.error(
                    quantity, text,
                    "'\(unit)' is ambiguous; did you mean \(prefix)bit (bits per second)? "
                        + "(for a rate in bytes multiply by 8, e.g. 8Mbit for 1MB/s)"
                )
            }
            if stem == "b" {
                throw UnitParser.error(quantity, text, "'\(unit)' is ambiguous; did you mean bit?")
            }
            throw UnitParser.error(quantity, text, "unknown unit '\(unit)'")
        }
        let bitsPerSecond = try UnitParser.scale(number, multiplier, quantity, text)
        if bitsPerSecond == 0 && number.value > 0 {
            throw UnitParser.error(quantity, text, "'\(text.trimmed)' is less than 1 bit per second")
        }
        return Bandwidth(bitsPerSecond: bitsPerSecond)
    }

    /// Like `parse`, but `unlimited` (any case) gives `nil`: no limit.
    public static func parseLimit(_ text: String) throws(UnitParseError) -> Bandwidth? {
        if text.trimmed.lowercased() == "unlimited" { return nil }
        do {
            return try Bandwidth.parse(text)
        } catch {
            throw UnitParseError(
                quantity: error.quantity,
                input: error.input,
                message: error.message.replacingFirst("allowed: ", with: "allowed: unlimited, or ")
            )
        }
    }
}

extension Probability {
    /// Parses `1%`, `0.5%`, `100%` or a fraction `0.01`.
    ///
    /// A bare `1` is rejected as ambiguous (100 % or 1 %?), and so is a bare number above 1.
    public static func parse(_ text: String) throws(UnitParseError) -> Probability {
        let quantity = UnitParseError.Quantity.probability
        let (number, unit) = try UnitParser.split(text, quantity)
        switch unit {
        case "%":
            guard number.value <= 100 else {
                throw UnitParser.error(quantity, text, "\(number.text)% is more than 100%")
            }
            return Probability(number.value / 100)
        case "":
            if number.value == 1 {
                throw UnitParser.error(
                    quantity, text,
                    "'\(number.text)' is ambiguous: write 100% (always) or 1% (one in a hundred)"
                )
            }
            guard number.value < 1 else {
                throw UnitParser.error(
                    quantity, text, "\(number.text) is more than 1 as a fraction; did you mean \(number.text)%?"
                )
            }
            return Probability(number.value)
        default:
            throw UnitParser.error(quantity, text, "unknown unit '\(unit)'")
        }
    }
}

// MARK: - Shared machinery

/// The number part of a unit value, kept as written for messages.
struct ParsedNumber {
    var text: String
    var value: Double
}

enum UnitParser {
    static func error(_ quantity: UnitParseError.Quantity, _ input: String, _ problem: String) -> UnitParseError {
        let separator = problem.hasSuffix("?") ? " " : "; "
        return UnitParseError(quantity: quantity, input: input, message: problem + separator + quantity.allowedForms)
    }

    /// Splits `  1.5 Mbit ` into the number 1.5 and the unit `Mbit`. The number must be plain
    /// decimal digits with an optional fraction: no sign, no exponent, no `inf`.
    static func split(
        _ text: String,
        _ quantity: UnitParseError.Quantity
    ) throws(UnitParseError) -> (ParsedNumber, String) {
        let trimmed = text.trimmed
        if trimmed.isEmpty {
            throw self.error(quantity, text, "the value is empty")
        }
        // No value is this long (`1.5Mbit`, `400ms`): the check comes first, and what later
        // messages quote stays short.
        guard trimmed.count <= 64 else {
            throw self.error(quantity, text, "'\(TerminalText.quoted(trimmed))' is too long to be one value")
        }
        if trimmed.hasPrefix("-") {
            throw self.error(quantity, text, "'\(trimmed)' is negative")
        }
        let scalars = Array(trimmed.unicodeScalars)
        var index = 0
        if scalars[index] == "+" { index += 1 }
        let numberStart = index
        var sawDigit = false
        var sawPoint = false
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar >= "0" && scalar <= "9" {
                sawDigit = true
            } else if scalar == "." && !sawPoint {
                sawPoint = true
            } else {
                break
            }
            index += 1
        }
        let numberText = String(String.UnicodeScalarView(scalars[numberStart..<index]))
        guard sawDigit, !numberText.hasSuffix("."), !numberText.hasPrefix("."), let value = Double(numberText) else {
            throw self.error(quantity, text, "'\(trimmed)' does not start with a number")
        }
        var unitStart = index
        while unitStart < scalars.count && scalars[unitStart] == " " { unitStart += 1 }
        let unit = String(String.UnicodeScalarView(scalars[unitStart...]))
        if unit.unicodeScalars.contains(where: { $0 == " " || $0 == "\t" }) {
            throw self.error(quantity, text, "'\(trimmed)' is not a single value")
        }
        return (ParsedNumber(text: numberText, value: value), unit)
    }

    /// `number × multiplier`, rounded to an integer, or an error when it does not fit in 64 bits.
    static func scale(
        _ number: ParsedNumber,
        _ multiplier: Double,
        _ quantity: UnitParseError.Quantity,
        _ text: String
    ) throws(UnitParseError) -> Int64 {
        let scaled = (number.value * multiplier).rounded()
        // 2^62: far beyond any sensible value, and safely inside Int64 after rounding.
        guard scaled.isFinite, scaled < 4.6e18 else {
            throw self.error(quantity, text, "'\(text.trimmed)' is too large")
        }
        return Int64(scaled)
    }

    /// For `kb`, `Kb`, `mb`, `Mb`, `gb`, `Gb`: the prefix as it should be written before `bit`.
    static func prefixOfLowercaseB(_ unit: String) -> String? {
        switch unit {
        case "kb", "Kb", "kib", "Kib": return "k"
        case "mb", "Mb", "mib", "Mib": return "M"
        case "gb", "Gb", "gib", "Gib": return "G"
        default: return nil
        }
    }

    static func isBitRateUnit(_ unit: String) -> Bool {
        ["bit", "kbit", "Kbit", "Mbit", "mbit", "Gbit", "gbit", "bps", "kbps", "Mbps", "Gbps"].contains(unit)
    }

    /// Bytes per second for one unit of a byte-rate form (`MB/s`, `KBps`, `MiB/s`), or 0.
    static func byteRateMultiplier(_ unit: String) -> Double {
        switch unit {
        case "B/s", "Bps", "B": return 1
        case "KB/s", "kB/s", "KBps", "kBps", "KB", "kB": return 1e3
        case "MB/s", "mB/s", "MBps", "MB": return 1e6
        case "GB/s", "gB/s", "GBps", "GB": return 1e9
        case "KiB/s", "KiB": return 1024
        case "MiB/s", "MiB": return 1024 * 1024
        case "GiB/s", "GiB": return 1024 * 1024 * 1024
        default: return 0
        }
    }
}

fileprivate extension String {
    var trimmed: String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }

    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = self.range(of: target) else { return self }
        return self.replacingCharacters(in: range, with: replacement)
    }
}
