/// The `Range` header of a request for a /bytes resource, reduced to what the origin serves (RFC 9110 §14.2).
///
/// ```
/// bytes=100-199  → .closed(100, 199)   206, bytes 100…199
/// bytes=100-     → .from(100)          206, bytes 100…end
/// bytes=-100     → .suffix(100)        206, the last 100 bytes
/// bytes=0-1,5-9  → .multiple           200, full body (a server may ignore multi-range)
/// items=0-1, junk, 9-3 → .ignored      200, full body (an invalid Range is ignored)
/// ```
public enum ByteRangeRequest: Equatable, Sendable {
    case closed(first: Int64, last: Int64)
    case from(first: Int64)
    case suffix(length: Int64)
    case multiple
    case ignored

    public init(header: String) {
        let value = header.trimmingWhitespace
        guard let equals = value.firstIndex(of: "="),
            value[..<equals].trimmingWhitespace.lowercased() == "bytes"
        else {
            self = .ignored
            return
        }
        let specs = value[value.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false)
        let parsed = specs.map { Self.parseSpec($0.trimmingWhitespace) }
        if parsed.contains(where: { $0 == nil }) {
            self = .ignored
        } else if parsed.count > 1 {
            self = .multiple
        } else if let single = parsed.first, let range = single {
            self = range
        } else {
            self = .ignored
        }
    }

    private static func parseSpec(_ spec: Substring) -> ByteRangeRequest? {
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        let firstText = spec[..<dash].trimmingWhitespace
        let lastText = spec[spec.index(after: dash)...].trimmingWhitespace
        if firstText.isEmpty {
            return OriginUnits.parseCount(lastText).map { .suffix(length: $0) }
        }
        guard let first = OriginUnits.parseCount(firstText) else { return nil }
        if lastText.isEmpty {
            return .from(first: first)
        }
        guard let last = OriginUnits.parseCount(lastText), last >= first else { return nil }
        return .closed(first: first, last: last)
    }

    /// What to serve from a representation of `size` bytes.
    enum Resolution: Equatable, Sendable {
        /// 200 with the whole body.
        case full
        /// 206 with these bytes.
        case partial(Range<Int64>)
        /// 416.
        case unsatisfiable
    }

    func resolve(size: Int64) -> Resolution {
        switch self {
        case .ignored, .multiple:
            return .full
        case .closed(let first, let last):
            guard first < size else { return .unsatisfiable }
            return .partial(first..<(min(last, size - 1) + 1))
        case .from(let first):
            guard first < size else { return .unsatisfiable }
            return .partial(first..<size)
        case .suffix(let length):
            guard length > 0, size > 0 else { return .unsatisfiable }
            return .partial(max(0, size - length)..<size)
        }
    }
}
