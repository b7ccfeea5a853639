/// One part of a scenario suite split over CI machines (`netcond test --shard I/N`): every scenario
/// in exactly one part, the same parts on every machine (they depend only on the scenarios' names
/// and deadlines, not on paths, order of discovery or the clock), and parts of about the same
/// length: the longest scenarios are dealt first, each to the part with the least so far
/// (longest-processing-time first), weighing each by its deadline, the longest it can run.
public struct ScenarioShard: Sendable, Equatable, CustomStringConvertible {
    /// 1-based.
    public var index: Int
    public var count: Int

    public static let maximumCount = 1000

    /// Parses `I/N` (1 ≤ I ≤ N ≤ 1000); the error names the allowed form.
    public init(parsing text: String) throws(ScenarioRunError) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        let allowed = "allowed: I/N with whole numbers 1 ≤ I ≤ N ≤ \(Self.maximumCount), e.g. --shard 2/4"
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
            throw ScenarioRunError(description: "--shard '\(text)' is not I/N; \(allowed)", exitCode: 2)
        }
        guard count >= 1, count <= Self.maximumCount, index >= 1, index <= count else {
            throw ScenarioRunError(
                description: "--shard \(text): there is no part \(index) of \(count); \(allowed)", exitCode: 2)
        }
        self.index = index
        self.count = count
    }

    public var description: String { "\(self.index)/\(self.count)" }

    /// The part each item falls in (0-based), by `name` (unique) and `weight` (seconds).
    public static func parts<T>(_ items: [T], count: Int, name: (T) -> String, weight: (T) -> Double) -> [Int] {
        let order = items.indices.sorted {
            let (a, b) = (weight(items[$0]), weight(items[$1]))
            return a != b ? a > b : name(items[$0]) < name(items[$1])
        }
        var load = [Double](repeating: 0, count: count)
        var part = [Int](repeating: 0, count: items.count)
        for index in order {
            // The least loaded part; the lowest number among equals.
            let target = load.indices.min { load[$0] != load[$1] ? load[$0] < load[$1] : $0 < $1 }!
            part[index] = target
            load[target] += weight(items[index])
        }
        return part
    }

    /// The items of this part, in their own order.
    public func select<T>(_ items: [T], name: (T) -> String, weight: (T) -> Double) -> [T] {
        let parts = Self.parts(items, count: self.count, name: name, weight: weight)
        return items.indices.filter { parts[$0] == self.index - 1 }.map { items[$0] }
    }
}
