/// How late things happened compared with when they were due: 10 µs buckets up to 20 ms, and a
/// count of later ones. The proxy records each link timer's wake-up here, so its own timing can
/// be told apart from the machine's and the client's (`GET /status`, `scripts/bench`).
public struct LatenessHistogram: Sendable, Equatable {
    public static let bucket = Span.microseconds(10)
    public static let buckets = 2000
    /// The range the buckets cover (20 ms); later ones are only counted.
    public static let range = LatenessHistogram.bucket * Int64(LatenessHistogram.buckets)

    private var counts = [Int](repeating: 0, count: LatenessHistogram.buckets + 1)
    public private(set) var count = 0
    public private(set) var maximum = Span.zero

    public init() {}

    /// How many were later than `range`.
    public var beyondRange: Int { self.counts[Self.buckets] }

    public mutating func record(_ lateness: Span) {
        let late = max(.zero, lateness)
        let index = min(Int(late.nanoseconds / Self.bucket.nanoseconds), Self.buckets)
        self.counts[index] += 1
        self.count += 1
        if late > self.maximum { self.maximum = late }
    }

    /// How many were at least `span` late (to the bucket: `span` is rounded down to 10 µs; a span
    /// past ``range`` counts all those beyond it).
    public func count(atLeast span: Span) -> Int {
        let first = min(max(0, Int(span.nanoseconds / Self.bucket.nanoseconds)), Self.buckets)
        return self.counts[first...].reduce(0, +)
    }

    /// The upper edge of the bucket holding the `p`-th percentile (0 < p ≤ 100), never over the
    /// maximum; zero when empty, `maximum` when it falls beyond the last bucket.
    public func percentile(_ p: Double) -> Span {
        guard self.count > 0 else { return .zero }
        let rank = Int((p / 100 * Double(self.count)).rounded(.up))
        var seen = 0
        for (index, count) in self.counts.enumerated() {
            seen += count
            if seen >= max(1, rank) {
                return index == Self.buckets ? self.maximum : min(self.maximum, Self.bucket * Int64(index + 1))
            }
        }
        return self.maximum
    }
}
