import Foundation

/// One lane per destination (a route of the profile), below the bytes delivered: the route's state
/// as it moved (its link's phase; an outage red, a stall orange, as the link's lane) and the bytes
/// its connections carried down, each lane on its own scale; its name and total on the left.
extension HTMLReport {
    static let routeLaneHeight = 30.0
    /// Lanes drawn; a report keeps more (``ReportScenario/RouteLane/maxLanes``).
    static let maxRouteLanes = 12

    /// The lanes drawn: the report's first ones, rows with a time that is one.
    static func drawnRoutes(_ scenario: ReportScenario) -> [ReportScenario.RouteLane] {
        (scenario.routes ?? []).prefix(Self.maxRouteLanes).map { lane in
            var lane = lane
            lane.rows = lane.rows.filter { $0.at.isFinite && $0.down.isFinite && $0.up.isFinite }
            return lane
        }
    }

    static func routeLanes(
        _ lanes: [ReportScenario.RouteLane], top: Double, end: Double, position: (Double) -> Double
    ) -> (svg: String, names: String) {
        var svg = "", names = ""
        for (number, lane) in lanes.enumerated() {
            let laneTop = top + Self.routeLaneHeight * Double(number)
            let total = lane.rows.last?.down ?? 0
            let name = lane.name.count > 24 ? String(lane.name.prefix(23)) + "…" : lane.name
            names +=
                "<text class=\"lane route-name\" x=\"4\" y=\"\(Int(laneTop + 10))\"><title>\(Self.escape(lane.name)): "
                + "\(Self.escape(lane.match))</title>\(Self.escape(name))</text>"
                + "<text class=\"scale-label\" x=\"\(Int(Self.plotLeft - 4))\" y=\"\(Int(laneTop + 22))\">"
                + "\(Self.bytesText(total)) down</text>\n"
            svg += "<g class=\"route-lane\" data-route=\"\(Self.escape(lane.name))\">"
            svg += Self.routeStates(lane.rows, top: laneTop, end: end, position: position)
            svg += Self.routeBytes(lane, top: laneTop + 14, position: position)
            svg += "</g>\n"
        }
        return (svg, names)
    }

    /// Each state the route was in, as a span to the next change (the last to the run's end).
    static func routeStates(
        _ rows: [ReportScenario.RouteRow], top: Double, end: Double, position: (Double) -> Double
    ) -> String {
        var svg = ""
        var start = 0
        for index in rows.indices {
            let next = index + 1
            guard next == rows.count || rows[next].state != rows[start].state else { continue }
            let from = rows[start].at, until = next < rows.count ? rows[next].at : end
            svg +=
                "<g class=\"mark link-state route-state\" data-at=\"\(Self.number(from))\"><title>+\(Self.number(from))s "
                + "\(Self.escape(String(rows[start].state.prefix(160))))</title>"
                + Self.phaseSpan(rows[start].state, from: position(from), to: position(until), top: top) + "</g>"
            start = next
        }
        return svg
    }

    /// The bytes the route carried down, rising on the lane's own scale.
    static func routeBytes(_ lane: ReportScenario.RouteLane, top: Double, position: (Double) -> Double) -> String {
        guard let most = lane.rows.map(\.down).max(), most > 0 else { return "" }
        let every = max(1, Int((Double(lane.rows.count) / Double(Self.maxDeliveredPoints)).rounded(.up)))
        let drawn = lane.rows.enumerated().filter { $0.offset % every == 0 || $0.offset == lane.rows.count - 1 }
        let points = drawn.map {
            String(format: "%.1f,%.1f", position($0.element.at), top + 14 - 14 * max(0, $0.element.down) / most)
        }.joined(separator: " ")
        return "<polyline class=\"delivered route-bytes\" points=\"\(points)\"><title>bytes carried down to "
            + "\(Self.escape(lane.name)), up to \(Self.number(most))</title></polyline>"
    }
}
