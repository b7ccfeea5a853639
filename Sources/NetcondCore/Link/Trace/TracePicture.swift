/// A measured link's rate over time as one line of block characters, for a terminal: what
/// `netcond profiles show` prints under a profile whose direction is a trace or a step series.
///
/// ```
/// # down: rate per second, first 60 s (▁ lowest … █ 8Mbit): ▇▇▇▇▇▂▂▂▁▁█████▅▅▅ …
/// ```
public enum TracePicture {
    static let blocks: [Character] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]

    /// The mean rate of each of the first `seconds` seconds, in bits per second.
    public static func ratePerSecond(_ direction: LinkDirection, seconds: Int) -> [Double]? {
        if let trace = direction.trace {
            var bytes = [Double](repeating: 0, count: seconds)
            var at = trace.first(atOrAfter: .zero)
            // Bounded: at most 100 Gbit/s for a minute of opportunities.
            for _ in 0..<5_000_000 {
                let second = Int(trace.time(of: at).nanoseconds / 1_000_000_000)
                if second >= seconds { break }
                bytes[second] += Double(LinkTrace.opportunityBytes)
                at = trace.next(after: at)
            }
            return bytes.map { $0 * 8 }
        }
        if let series = direction.series {
            // Ten samples a second: the mean rate of the second.
            return (0..<seconds).map { second in
                (0..<10).map { tenth in
                    Double(series.conditions(at: Instant(nanoseconds: Int64(second) * 1_000_000_000 + Int64(tenth) * 100_000_000)).rate.bitsPerSecond)
                }.reduce(0, +) / 10
            }
        }
        return nil
    }

    /// `# down: rate per second, first 60 s (▁ 0 … █ 8Mbit): ▇▇▇…`, or nil for a fixed rate.
    public static func line(_ name: String, _ direction: LinkDirection, seconds: Int = 60) -> String? {
        guard let rates = self.ratePerSecond(direction, seconds: seconds), let top = rates.max(), top > 0 else { return nil }
        let bars = rates.map { rate in self.blocks[min(self.blocks.count - 1, Int(rate / top * Double(self.blocks.count - 1) + 0.5))] }
        let peak = Bandwidth(bitsPerSecond: Int64(top))
        return "# \(name): rate per second, first \(seconds) s (▁ 0 … █ \(peak)): " + String(bars)
    }
}
