/// A measured link's rate (and a step series' delay) over time as lines of block characters, one
/// a second, a line a minute, for a terminal: what `netcond profiles show` prints under a profile
/// whose direction is a trace or a step series (as comments: the YAML still reads back).
public enum TracePicture {
    static let blocks: [Character] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]

    /// The mean rate of each of the first `seconds` seconds, in bits per second.
    public static func ratePerSecond(_ direction: LinkDirection, seconds: Int) -> [Double]? {
        if let trace = direction.trace {
            return (0..<seconds).map { second in
                let start = Instant(nanoseconds: Int64(second) * 1_000_000_000)
                return Double(
                    trace.count(from: start, to: start + .seconds(Int64(1))) * Int64(LinkTrace.opportunityBytes) * 8)
            }
        }
        if let series = direction.series {
            // Ten samples a second: the mean rate of the second.
            return (0..<seconds).map { second in
                (0..<10).map { tenth in
                    Double(
                        series.conditions(
                            at: Instant(nanoseconds: Int64(second) * 1_000_000_000 + Int64(tenth) * 100_000_000)
                        ).rate.bitsPerSecond)
                }.reduce(0, +) / 10
            }
        }
        return nil
    }

    /// The mean one-way delay of each of the first `seconds` seconds, in milliseconds: a step
    /// series' (nil for anything else, whose delay does not move).
    public static func delayPerSecond(_ direction: LinkDirection, seconds: Int) -> [Double]? {
        guard let series = direction.series else { return nil }
        return (0..<seconds).map { second in
            (0..<10).map { tenth in
                Double(
                    series.conditions(
                        at: Instant(nanoseconds: Int64(second) * 1_000_000_000 + Int64(tenth) * 100_000_000)
                    ).delay.nanoseconds) / 1e6
            }.reduce(0, +) / 10
        }
    }

    /// How many seconds the picture covers: one period of the file (whole seconds, at least one
    /// minute, at most `limit`), or a minute past a series' last row when it does not repeat.
    public static func span(_ direction: LinkDirection, limit: Int = 300) -> Int {
        var seconds = 60
        if let trace = direction.trace {
            seconds = Int((trace.periodMilliseconds + 999) / 1000)
        } else if let series = direction.series {
            seconds =
                series.period.map { Int(($0.nanoseconds + 999_999_999) / 1_000_000_000) }
                ?? Int(series.steps.last!.at.nanoseconds / 1_000_000_000) + 60
        }
        return min(max(seconds, 60), limit)
    }

    /// The picture: per minute, a line of the rate (and of a series' delay), one block a second,
    /// on one scale for the whole picture; empty for a fixed rate.
    ///
    /// ```
    /// # down: rate, 0–60 s (▁ 0 … █ 190.65Mbit): ▇█▇▇███▇▇▇▇█▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▅▅▅▅▅▅▅▅▄▅▄▄▅▅▅▄▅▅
    /// # down: delay, 0–60 s (▁ 0 … █ 29.5ms): ▆▆▆▆▆▆▆▆▆▆▆▆▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅
    /// ```
    public static func lines(_ name: String, _ direction: LinkDirection, seconds: Int? = nil) -> [String] {
        let seconds = seconds ?? self.span(direction)
        guard let rates = self.ratePerSecond(direction, seconds: seconds), let top = rates.max(), top > 0 else {
            return []
        }
        let delays = self.delayPerSecond(direction, seconds: seconds)
        let peak = Bandwidth(bitsPerSecond: Int64(top))
        let slowest = delays?.max() ?? 0
        func bars(_ values: ArraySlice<Double>, _ most: Double) -> String {
            String(
                values.map { value in
                    self.blocks[
                        most > 0
                            ? min(self.blocks.count - 1, Int(value / most * Double(self.blocks.count - 1) + 0.5)) : 0]
                })
        }
        var lines: [String] = []
        for from in stride(from: 0, to: seconds, by: 60) {
            let to = min(from + 60, seconds)
            lines.append("# \(name): rate, \(from)–\(to) s (▁ 0 … █ \(peak)): " + bars(rates[from..<to], top))
            if let delays {
                let most = Span(nanoseconds: Int64((slowest * 1e6).rounded()))
                lines.append("# \(name): delay, \(from)–\(to) s (▁ 0 … █ \(most)): " + bars(delays[from..<to], slowest))
            }
        }
        return lines
    }
}
