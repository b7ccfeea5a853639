import NetcondCore

/// A request the origin cannot serve because of what the client wrote; `reason` becomes the 400 body.
struct OriginInputError: Error, Equatable {
    var reason: String

    init(_ reason: String) {
        self.reason = reason
    }
}

/// Parses the human units that appear in origin URLs: sizes (`/bytes/200KB`) and durations (`/delay/1.5s`).
///
/// Arithmetic is exact (integers, no floating point): `1.5KB` is 1536 bytes, `0.1KB` is rejected because it is not a
/// whole number of bytes.
enum OriginUnits {
    /// `1500`, `1500B`, `200KB`, `200k`, `1MB`, `1.5m`, `4GB`, `64KiB` (case-insensitive; K/M/G are binary
    /// multiples), between 0 and `maximum` bytes.
    static func parseSize(_ text: Substring, maximum: Int64) throws(OriginInputError) -> Int64 {
        let (mantissa, unit) = Self.splitNumber(text)
        let multiplier: Int64
        switch unit.lowercased() {
        case "", "b": multiplier = 1
        case "k", "kb", "kib": multiplier = 1 << 10
        case "m", "mb", "mib": multiplier = 1 << 20
        case "g", "gb", "gib": multiplier = 1 << 30
        default:
            throw OriginInputError(
                "invalid size '\(text)': unknown unit '\(unit)' (use B, KB, MB or GB, e.g. 200KB)")
        }
        let bytes: Int64
        switch Self.scaled(mantissa, by: multiplier) {
        case .value(let value) where value <= maximum:
            bytes = value
        case .value, .tooLarge:
            throw OriginInputError("invalid size '\(text)': larger than the maximum \(ByteCount(bytes: maximum))")
        case .notWhole:
            throw OriginInputError("invalid size '\(text)': not a whole number of bytes")
        case .malformed:
            throw OriginInputError(
                "invalid size '\(text)': expected a number of bytes with an optional unit, e.g. 1500, 200KB, 1.5MB")
        }
        return bytes
    }

    /// `500ms`, `2s`, `1.5s`, `2` (seconds), between 0 and `maximum`.
    static func parseDuration(_ text: Substring, maximum: Span) throws(OriginInputError) -> Span {
        let (mantissa, unit) = Self.splitNumber(text)
        let nanosecondsPerUnit: Int64
        switch unit.lowercased() {
        case "ms": nanosecondsPerUnit = 1_000_000
        case "", "s": nanosecondsPerUnit = 1_000_000_000
        default:
            throw OriginInputError("invalid duration '\(text)': unknown unit '\(unit)' (use ms or s, e.g. 500ms)")
        }
        let nanoseconds: Int64
        switch Self.scaled(mantissa, by: nanosecondsPerUnit) {
        case .value(let value) where value <= maximum.nanoseconds:
            nanoseconds = value
        case .value, .tooLarge:
            throw OriginInputError("invalid duration '\(text)': longer than the maximum \(maximum)")
        case .notWhole:
            throw OriginInputError("invalid duration '\(text)': finer than a nanosecond")
        case .malformed:
            throw OriginInputError("invalid duration '\(text)': expected a number with a unit, e.g. 500ms, 1.5s")
        }
        return Span(nanoseconds: nanoseconds)
    }

    /// Parses a non-negative decimal integer of at most 18 digits.
    static func parseCount(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }

    /// Splits `1.5MB` into `("1.5", "MB")`.
    private static func splitNumber(_ text: Substring) -> (Substring, Substring) {
        let end = text.firstIndex(where: { !($0.isASCII && ($0.isNumber || $0 == ".")) }) ?? text.endIndex
        return (text[..<end], text[end...])
    }

    /// The outcome of scaling a decimal mantissa by a unit.
    private enum Scaled {
        case value(Int64)
        case malformed
        case notWhole
        case tooLarge
    }

    /// `mantissa × multiplier`, computed exactly.
    private static func scaled(_ mantissa: Substring, by multiplier: Int64) -> Scaled {
        let parts = mantissa.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let wholePart = parts.first, let whole = Self.parseCount(wholePart) else { return .malformed }
        let (wholeScaled, overflow) = whole.multipliedReportingOverflow(by: multiplier)
        if overflow { return .tooLarge }
        guard parts.count == 2 else { return .value(wholeScaled) }
        let fractionPart = parts[1]
        guard fractionPart.count <= 9, let fraction = Self.parseCount(fractionPart) else { return .malformed }
        var denominator: Int64 = 1
        for _ in 0..<fractionPart.count {
            denominator *= 10
        }
        let (fractionScaled, fractionOverflow) = fraction.multipliedReportingOverflow(by: multiplier)
        if fractionOverflow { return .tooLarge }
        guard fractionScaled % denominator == 0 else { return .notWhole }
        let (sum, sumOverflow) = wholeScaled.addingReportingOverflow(fractionScaled / denominator)
        return sumOverflow ? .tooLarge : .value(sum)
    }
}
