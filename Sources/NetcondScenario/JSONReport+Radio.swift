import NetcondCore

extension ScenarioSuite.JSONReport.Scenario {
    /// What the device's radio did over the client's run (``RadioReport``): the model and its
    /// constants (seconds, watts), the totals, and the lane (each state's intervals, seconds since
    /// the client started).
    struct Radio: Codable, Equatable, Sendable {
        struct Constants: Codable, Equatable, Sendable {
            var promotion: Double
            var promotionPower: Double
            var activePower: Double
            var inactivity: Double
            var tail: Double
            var tailPower: Double
            var secondTail: Double
            var secondTailPower: Double
            var idlePower: Double
        }

        struct Interval: Codable, Equatable, Sendable {
            /// `idle`, `promotion`, `active`, `tail`, `second-tail`.
            var state: String
            var start: Double
            var end: Double
        }

        /// `lte`, `3g`, `5g`, `wifi`.
        var model: String
        /// Where the model's defaults come from.
        var source: String
        var constants: Constants
        /// The client's run, seconds.
        var windowSeconds: Double
        /// Seconds powered (promotion, active, tails).
        var onSeconds: Double
        /// `onSeconds` over `windowSeconds`, 0…1.
        var onShare: Double
        var promotions: Int
        var promotionsPerMinute: Double
        /// Estimated energy, joules.
        var joules: Double
        /// Seconds in each state.
        var stateSeconds: [String: Double]
        var intervals: [Interval]
    }
}

extension ScenarioSuite.JSONReport.Scenario.Radio {
    init(_ report: RadioReport) {
        func ms(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
        let spec = report.spec
        self.init(
            model: spec.model.rawValue, source: spec.source,
            constants: Constants(
                promotion: spec.promotion.seconds, promotionPower: spec.promotionPower.watts,
                activePower: spec.activePower.watts, inactivity: spec.inactivity.seconds, tail: spec.tail.seconds,
                tailPower: spec.tailPower.watts, secondTail: spec.secondTail.seconds,
                secondTailPower: spec.secondTailPower.watts, idlePower: spec.idlePower.watts),
            windowSeconds: ms(report.window), onSeconds: ms(report.onSeconds),
            onShare: (report.onShare * 10_000).rounded() / 10_000, promotions: report.promotions,
            promotionsPerMinute: (report.promotionsPerMinute * 10_000).rounded() / 10_000,
            joules: (report.joules * 100).rounded() / 100,
            stateSeconds: Dictionary(
                uniqueKeysWithValues: RadioState.allCases.map { ($0.rawValue, ms(report.seconds[$0] ?? 0)) }),
            intervals: report.intervals.map { Interval(state: $0.state.rawValue, start: ms($0.start), end: ms($0.end)) }
        )
    }
}
