import NetcondCore
import NetcondProxy

extension ScenarioSuite.JSONReport.Scenario {
    /// One destination's lane: a route of the profile, its state and the bytes its connections
    /// carried, sampled with the run's delivered bytes (every 100 ms), kept where they changed.
    struct RouteLane: Codable, Equatable, Sendable {
        var name: String
        /// What it matches, as a profile writes it.
        var match: String
        var rows: [RouteRow]

        /// Lanes a report keeps: a profile with more routes has its first ones drawn.
        static let maxLanes = 20

        /// The lanes of a run's samples, in the order the routes first appear (a profile switch can
        /// add some), and how many routes were left out (nil: none). Nil lanes: the run had no routes.
        static func lanes(_ samples: [DeliverySample]) -> ([RouteLane]?, Int?) {
            var lanes: [RouteLane] = []
            var laneOf: [String: Int] = [:]
            var leftOut: Set<String> = []
            for (index, sample) in samples.enumerated() {
                let last = index == samples.count - 1
                for route in sample.routes {
                    guard let lane = laneOf[route.name] ?? Self.open(route, &lanes, &laneOf) else {
                        leftOut.insert(route.name)
                        continue
                    }
                    let row = RouteRow(at: sample.at, route)
                    if last || lanes[lane].rows.last.map({ !$0.sameAs(row) }) ?? true { lanes[lane].rows.append(row) }
                }
            }
            return (lanes.isEmpty ? nil : lanes, leftOut.isEmpty ? nil : leftOut.count)
        }

        /// A lane for `route`, while there is room for one; its index.
        private static func open(_ route: ControlRoute, _ lanes: inout [RouteLane], _ laneOf: inout [String: Int])
            -> Int?
        {
            guard lanes.count < Self.maxLanes else { return nil }
            laneOf[route.name] = lanes.count
            lanes.append(RouteLane(name: route.name, match: route.match, rows: []))
            return lanes.count - 1
        }
    }

    /// `[seconds since the client started, state, bytes down, bytes up]`: a route at a moment. The
    /// state is its link's phase, then its outage or stall (`cdn, outage (blackhole)`).
    struct RouteRow: Codable, Equatable, Sendable {
        var at: Double
        var state: String
        var down: Double
        var up: Double

        init(at: Double, state: String, down: Double, up: Double) {
            self.at = at
            self.state = state
            self.down = down
            self.up = up
        }

        init(at: Double, _ route: ControlRoute) {
            var state = route.phase
            if let outage = route.outage { state += ", outage (\(outage))" }
            if !route.stalled.isEmpty { state += ", stalled (\(route.stalled.joined(separator: " ")))" }
            self.init(at: at, state: state, down: Double(route.bytesDown), up: Double(route.bytesUp))
        }

        /// The same state and bytes (whatever the moment).
        func sameAs(_ other: RouteRow) -> Bool {
            (self.state, self.down, self.up) == (other.state, other.down, other.up)
        }

        init(from decoder: any Decoder) throws {
            var row = try decoder.unkeyedContainer()
            self.at = try row.decode(Double.self)
            self.state = try row.decode(String.self)
            self.down = try row.decode(Double.self)
            self.up = try row.decode(Double.self)
        }

        func encode(to encoder: any Encoder) throws {
            var row = encoder.unkeyedContainer()
            try row.encode(self.at)
            try row.encode(self.state)
            try row.encode(self.down)
            try row.encode(self.up)
        }
    }
}
