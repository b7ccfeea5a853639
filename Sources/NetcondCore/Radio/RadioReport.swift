import Foundation

/// What the radio did over a window of a run (the client's run, in a scenario): its constants, its
/// totals and its lane (the intervals, in seconds from the window's start). Pure arithmetic on
/// ``RadioModel``'s intervals, clipped to the window.
public struct RadioReport: Sendable, Equatable {
    public struct Interval: Sendable, Equatable {
        public var state: RadioState
        /// Seconds from the window's start.
        public var start: Double
        public var end: Double

        public init(state: RadioState, start: Double, end: Double) {
            self.state = state
            self.start = start
            self.end = end
        }
    }

    public var spec: RadioSpec
    /// The window's length, in seconds.
    public var window: Double
    /// Seconds in each state (idle included), in ``RadioState`` order.
    public var seconds: [RadioState: Double]
    /// Wake-ups (promotions) that began in the window: the radio went on from idle (Wi-Fi's take
    /// no time, and count all the same).
    public var promotions: Int
    /// Estimated energy drawn by the radio over the window, in joules.
    public var joules: Double
    public var intervals: [Interval]

    public init(
        spec: RadioSpec, window: Double, seconds: [RadioState: Double], promotions: Int, joules: Double,
        intervals: [Interval]
    ) {
        self.spec = spec
        self.window = window
        self.seconds = seconds
        self.promotions = promotions
        self.joules = joules
        self.intervals = intervals
    }

    /// The lane of `intervals` over `[from, to]` (link time).
    public init(spec: RadioSpec, intervals all: [RadioInterval], from: Instant, to: Instant) {
        let to = max(to, from)
        var seconds: [RadioState: Double] = [:]
        var joules = 0.0
        var promotions = 0
        var lane: [Interval] = []
        for (index, interval) in all.enumerated() where interval.end > from && interval.start < to {
            let start = max(interval.start, from)
            let end = min(interval.end, to)
            let length = (end - start).seconds
            seconds[interval.state, default: 0] += length
            joules += length * interval.power.watts
            let woke = interval.state.isOn && (index == 0 || all[index - 1].state == .idle)
            if woke && interval.start >= from { promotions += 1 }
            let entry = Interval(state: interval.state, start: (start - from).seconds, end: (end - from).seconds)
            if let last = lane.last, last.state == entry.state, last.end == entry.start {
                lane[lane.count - 1].end = entry.end
            } else {
                lane.append(entry)
            }
        }
        self.init(
            spec: spec, window: (to - from).seconds, seconds: seconds, promotions: promotions, joules: joules,
            intervals: lane)
    }

    /// Seconds the radio was powered (promotion, active, tails).
    public var onSeconds: Double {
        RadioState.allCases.filter(\.isOn).reduce(0) { $0 + (self.seconds[$1] ?? 0) }
    }

    /// The share of the window the radio was powered (0…1; 0 for an empty window).
    public var onShare: Double { self.window > 0 ? min(1, self.onSeconds / self.window) : 0 }

    /// Promotions per minute of the window (0 for an empty window).
    public var promotionsPerMinute: Double { self.window > 0 ? Double(self.promotions) * 60 / self.window : 0 }

    /// `radio (lte): on 58.2 s of 60.1 s (97%), 12 promotions (12.0/min), ≈ 61 J`.
    public var summary: String {
        "radio (\(self.spec.model.rawValue)): on \(Self.secondsText(self.onSeconds)) of \(Self.secondsText(self.window)) "
            + "(\(Self.percentText(self.onShare))), \(self.promotions) promotion\(self.promotions == 1 ? "" : "s") "
            + "(\(String(format: "%.1f", self.promotionsPerMinute))/min), ≈ \(Self.energyText(self.joules))"
    }

    static func secondsText(_ value: Double) -> String { String(format: "%.1f s", value) }

    /// `61 J`, `4.2 J` under 10 (a report read back may hold any number: no trap on one).
    public static func energyText(_ value: Double) -> String {
        guard value.isFinite, abs(value) < 1e15 else { return String(format: "%g J", value) }
        return value >= 10 ? "\(Int(value.rounded())) J" : String(format: "%.1f J", value)
    }

    /// `97%` of a share (`0.97`); any number a report read back holds, without a trap.
    public static func percentText(_ share: Double) -> String {
        guard share.isFinite, abs(share) < 1e12 else { return String(format: "%g%%", share * 100) }
        return "\(Int((share * 100).rounded()))%"
    }
}
