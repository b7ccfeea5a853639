import Foundation
import NetcondCore

/// A scenario's timeline, in the manner of a browser's network panel: every lane on one time axis
/// (seconds since the client started), labels in a column on the left.
///
/// ```
///  timeline   ┆ what netcond's timeline did (dashed lines through every lane, labels in rows)
///  link       ▬▬ phases, outages (red), stalls (orange); faults applied ◆; the portal ●
///  rate,delay ▔▔ the down link's rate (solid) and one-way delay (dashed), as they moved
///  GET /a 206 ░░▓▓▓▓  one row per request: waiting on the server (light), receiving (solid),
///                     coloured by outcome; with many requests, rows packed, labels in titles
///  no server  ●─1.2s─●─2.4s─●  attempts that reached no server, and the gaps between attempts
///  bytes      ╱  bytes delivered to the client, with its scale
///  cdn 1.2 MB ▬▬╱ one lane per destination (a route): its state, and the bytes it carried down
///  output     │ the client's lines (stderr red)
///             0s   1s   2s …
/// ```
extension HTMLReport {
    /// Geometry: the label column, the plot area's x range, the view box's width.
    static let viewWidth = 1100.0
    static let plotLeft = 250.0
    static let plotRight = 1090.0
    /// Requests drawn one to a row (with a label) up to this many; beyond, packed into rows.
    static let labelledRequests = 60
    static let maxRequestRows = 60
    static let maxGapLabels = 40

    /// Room either side of the plot for the time axis's labels (a tick at 0 is centred on the
    /// plot's left edge: clipped there, `0s` read `s`).
    static let axisLabelRoom = 24.0

    /// The plot's time scale: seconds since the client started, from 0 to `end`, to x.
    struct TimeScale {
        let end: Double

        func position(_ at: Double) -> Double {
            HTMLReport.plotLeft + (HTMLReport.plotRight - HTMLReport.plotLeft) * min(max(at, 0), self.end) / self.end
        }

        func x(_ at: Double) -> String { String(format: "%.1f", self.position(at)) }
    }

    /// Each lane's top, from the rows the timeline's labels and the requests take.
    struct Lanes {
        var timeline = 8.0, link = 0.0, rate = 0.0, requests = 0.0
        var attempts = 0.0, bytes = 0.0, routes = 0.0, output = 0.0, axis = 0.0
        var height: Double { self.axis + 22 }

        init(timelineRows: Int, requestRows: Int, rowHeight: Double, routeLanes: Int = 0) {
            self.link = self.timeline + 14 * Double(timelineRows) + 8
            self.rate = self.link + 34
            self.requests = self.rate + 44
            self.attempts = self.requests + rowHeight * Double(requestRows) + 8
            self.bytes = self.attempts + 46
            self.routes = self.bytes + 70
            self.output = self.routes + HTMLReport.routeLaneHeight * Double(routeLanes)
            self.axis = self.output + 28
        }
    }

    /// A timeline in three parts: what stays put (lane names, request labels, scales), the time
    /// axis, and what sits on it (redrawn, or moved, when the reader zooms: see ``script``).
    struct Drawing {
        var fixed = "", ticks = "", svg = ""
    }

    /// Lanes, top to bottom: the timeline's events, the link, its rate and delay, requests, failed
    /// attempts with the gaps between attempts, bytes delivered, output lines; the time axis below.
    static func timeline(_ scenario: ReportScenario, index: Int) -> String {
        let requests = Self.drawnRequests(scenario)
        let scale = TimeScale(end: Self.timelineEnd(scenario, requests: requests))
        let labels = Self.placedLabels(scenario.timeline ?? [], scale: scale)
        let rows = RequestRows(requests, end: scale.end)
        let routes = Self.drawnRoutes(scenario)
        let lanes = Lanes(
            timelineRows: max(1, (labels.map(\.row).max() ?? 0) + 1), requestRows: rows.count, rowHeight: rows.height,
            routeLanes: routes.count)
        var drawing = Drawing()
        drawing.fixed += Self.laneNames(lanes, requests: requests.count, labelled: rows.labelled)
        drawing.ticks += Self.timeAxis(
            end: scale.end, x: scale.x, lineClass: "tick", from: lanes.timeline, to: lanes.axis,
            labelY: Int(lanes.axis + 14))
        drawing.svg += Self.timelineEvents(labels, lanes: lanes, scale: scale)
        let events = Array((scenario.events ?? []).prefix(Self.maxLinesDrawn * 2))
        drawing.svg += Self.linkStates(events, top: lanes.link, end: scale.end, position: scale.position)
        drawing.svg += Self.linkLane(scenario.link ?? [], top: lanes.rate, end: scale.end, x: scale.x)
        for (number, request) in requests.enumerated() {
            let row = Self.requestRow(
                request, top: lanes.requests + rows.height * Double(rows.rowOf[number]), height: rows.height - 3,
                labelled: rows.labelled, hosts: rows.showsHosts, end: scale.end, position: scale.position)
            drawing.svg += row.bar
            drawing.fixed += row.label
        }
        let originRequests = requests.compactMap { if case .origin(let request) = $0 { request } else { nil } }
        drawing.svg += Self.attemptLane(
            scenario.attempts ?? [], requests: originRequests, top: lanes.attempts, position: scale.position)
        let delivered = (scenario.delivered ?? []).filter { $0.at.isFinite && $0.bytes.isFinite }
            .map { ($0.at, $0.bytes) }
        let bytes = Self.bytesLane(delivered, top: lanes.bytes, x: scale.x)
        drawing.svg += bytes.line
        drawing.fixed += bytes.scale
        let destinations = Self.routeLanes(routes, top: lanes.routes, end: scale.end, position: scale.position)
        drawing.svg += destinations.svg
        drawing.fixed += destinations.names
        let lines = (scenario.output ?? []).suffix(Self.maxLinesDrawn)
        drawing.svg += Self.outputLines(lines, top: lanes.output, x: scale.x)
        drawing.svg += Self.checkMarks(scenario.checks ?? [], lanes: lanes, x: scale.x)
        if let deadline = Self.finite(scenario.deadline), deadline <= scale.end {
            drawing.svg += Self.deadlineMark(deadline, lanes: lanes, x: scale.x)
        }
        return Self.svg(drawing, index: index, lanes: lanes, end: scale.end)
            + Self.radioLane(scenario, index: index, end: scale.end) + Self.legend
    }

    /// A value that is a time (NaN and the infinities are not).
    static func finite(_ value: Double?) -> Double? { value.flatMap { $0.isFinite ? $0 : nil } }

    /// Where the axis ends: the run's end, or a later request or timeline event; 2 % more.
    static func timelineEnd(_ scenario: ReportScenario, requests: [DrawnRequest]) -> Double {
        var end = Self.finite(scenario.seconds) ?? 0
        for request in requests { end = max(end, Self.finite(request.finished) ?? Self.finite(request.at) ?? 0) }
        for event in scenario.timeline ?? [] { end = max(end, Self.finite(event.at) ?? 0) }
        // A report's times are its own; one made by hand may hold any number (1e308 once drew forever).
        return min(max(end, 0.1), Self.longestRun) * 1.02
    }

    /// A timeline event and the row its label is in.
    typealias PlacedLabel = (event: ReportScenario.Applied, row: Int)

    /// The timeline's labels, each in the first of three rows where it does not overlap the one before.
    static func placedLabels(_ applied: [ReportScenario.Applied], scale: TimeScale) -> [PlacedLabel] {
        var labelRows: [Double] = [-1e9, -1e9, -1e9]
        var placed: [PlacedLabel] = []
        for event in applied {
            let at = scale.position(Self.finite(event.at) ?? 0)
            let width = Double(min(event.what.count, 80)) * 6.2 + 8
            let row = labelRows.firstIndex { $0 < at } ?? 0
            labelRows[row] = at + width
            placed.append((event, row))
        }
        return placed
    }

    /// The lanes' names in the left column, and the axis's.
    static func laneNames(_ lanes: Lanes, requests: Int, labelled: Bool) -> String {
        var fixed = ""
        let named = [
            ("timeline", lanes.timeline), ("link", lanes.link), ("rate, delay", lanes.rate),
            ("attempts", lanes.attempts), ("bytes", lanes.bytes), ("output", lanes.output),
        ]
        for (label, top) in named {
            fixed += "<text class=\"lane\" x=\"4\" y=\"\(Int(top + 12))\">\(label)</text>"
        }
        if !labelled || requests == 0 {
            fixed +=
                "<text class=\"lane\" x=\"4\" y=\"\(Int(lanes.requests + 12))\">requests"
                + (requests == 0 ? " (none)" : " (\(requests), packed)") + "</text>"
        }
        return fixed + "<text class=\"lane axis-name\" x=\"4\" y=\"\(Int(lanes.axis + 14))\">"
            + "seconds since the client started</text>\n"
    }

    /// What netcond's timeline did: a dashed line through every lane, its label in its row.
    static func timelineEvents(_ placed: [PlacedLabel], lanes: Lanes, scale: TimeScale) -> String {
        var svg = ""
        for (event, row) in placed {
            let at = Self.finite(event.at) ?? 0
            let what = event.what
            let shown = what.count > 80 ? String(what.prefix(79)) + "…" : what
            svg +=
                "<g class=\"mark link-event\" data-at=\"\(Self.number(at))\"><title>+\(Self.number(at))s \(Self.escape(what))</title>"
            svg +=
                "<line x1=\"\(scale.x(at))\" x2=\"\(scale.x(at))\" y1=\"\(lanes.timeline)\" "
                + "y2=\"\(lanes.output + 20)\"/>"
            svg +=
                "<text x=\"\(scale.x(at))\" dx=\"3\" y=\"\(Int(lanes.timeline + 10 + 14 * Double(row)))\">"
                + "\(Self.escape(shown))</text></g>\n"
        }
        return svg
    }

    /// The client's output lines, each a tick (stderr red).
    static func outputLines(_ lines: ArraySlice<ReportScenario.Line>, top: Double, x: (Double) -> String) -> String {
        var svg = ""
        for line in lines {
            let at = Self.finite(line.at) ?? 0
            let text = String(line.text.prefix(Self.maxLineCharacters))
            let stream = line.stderr ? "stderr" : "stdout"
            svg +=
                "<g class=\"mark output \(stream)\" data-at=\"\(Self.number(at))\"><title>+\(Self.number(at))s \(stream): "
                + "\(Self.escape(text))</title><path d=\"M\(x(at)) \(Int(top))v16\"/></g>\n"
        }
        return svg
    }

    /// Each check's moments, shown when the check is picked.
    static func checkMarks(_ checks: [ReportScenario.Check], lanes: Lanes, x: (Double) -> String) -> String {
        var svg = ""
        for check in checks {
            let name = Self.escape(check.name)
            for at in check.marks where at.isFinite {
                svg +=
                    "<line class=\"check-mark\" data-check=\"\(name)\" data-at=\"\(Self.number(at))\" x1=\"\(x(at))\" "
                    + "x2=\"\(x(at))\" y1=\"\(lanes.timeline)\" y2=\"\(lanes.axis)\"/>"
            }
        }
        return svg
    }

    static func deadlineMark(_ deadline: Double, lanes: Lanes, x: (Double) -> String) -> String {
        "<g class=\"mark deadline\" data-at=\"\(Self.number(deadline))\"><title>the client's deadline, "
            + "+\(Self.number(deadline))s</title><line x1=\"\(x(deadline))\" x2=\"\(x(deadline))\" "
            + "y1=\"\(lanes.timeline)\" "
            + "y2=\"\(lanes.axis)\"/><text x=\"\(x(deadline))\" dx=\"-3\" y=\"\(Int(lanes.axis - 4))\" "
            + "class=\"deadline-label\">deadline</text></g>"
    }

    /// The picture: the plot clipped to its area, the axis's labels given room either side.
    static func svg(_ drawing: Drawing, index: Int, lanes: Lanes, end: Double) -> String {
        let left = Self.plotLeft, right = Self.plotRight, height = Int(lanes.height), room = Self.axisLabelRoom
        let clip =
            "<defs><clipPath id=\"clip-\(index)\"><rect x=\"\(Int(left - 1))\" y=\"0\" width=\"\(Int(right - left + 2))\" "
            + "height=\"\(height)\"/></clipPath>"
            + "<clipPath id=\"axis-clip-\(index)\"><rect x=\"\(Int(left - room))\" y=\"0\" "
            + "width=\"\(Int(right - left + 2 * room))\" height=\"\(height)\"/></clipPath></defs>\n"
        return "<svg class=\"timeline\" id=\"timeline-\(index)\" viewBox=\"0 0 \(Int(Self.viewWidth)) \(height)\" "
            + "width=\"100%\" "
            + "role=\"img\" aria-label=\"timeline\" data-end=\"\(Self.number(end))\" data-left=\"\(Int(left))\" data-right=\"\(Int(right))\" "
            + "data-axis=\"\(Int(lanes.axis))\" data-top=\"\(Int(lanes.timeline))\">\n" + clip + drawing.fixed
            + "<g class=\"axis-ticks\" clip-path=\"url(#axis-clip-\(index))\">" + drawing.ticks + "</g>\n"
            + "<g class=\"zoomable\" clip-path=\"url(#clip-\(index))\">\n" + drawing.svg + "</g>\n"
            + "<rect class=\"brush\" x=\"0\" y=\"0\" width=\"0\" height=\"\(height)\"/></svg>\n"
    }

    /// A time axis: about eight ticks at round seconds from 0 to `end`, each a line from `top` to
    /// `bottom` and a label (`2.5s`) at `labelY`.
    static func timeAxis(
        end: Double, x: (Double) -> String, lineClass: String, from top: Double, to bottom: Double, labelY: Int
    )
        -> String
    {
        var svg = ""
        let step = Self.tickStep(end)
        var tick = 0.0
        for _ in 0..<100 where tick <= end {
            svg += "<line class=\"\(lineClass)\" x1=\"\(x(tick))\" x2=\"\(x(tick))\" y1=\"\(top)\" y2=\"\(bottom)\"/>"
            svg += "<text class=\"axis\" x=\"\(x(tick))\" y=\"\(labelY)\">\(Self.number(tick))s</text>"
            tick += step
        }
        return svg
    }

    /// What the link recorded of itself: each phase as a span to the next (an outage red, a stall
    /// orange) with its name where it fits; faults applied (◆) and portal events (●) below.
    static func linkStates(
        _ events: [ReportScenario.Event], top: Double, end: Double, position: (Double) -> Double
    ) -> String {
        var svg = ""
        // Where each phase ends: where the next one begins (the last, at the end).
        var phaseEnds: [Int: Double] = [:]
        var open: Int?
        for (number, event) in events.enumerated() where event.kind == .link {
            if let open { phaseEnds[open] = Self.finite(event.at) ?? end }
            open = number
        }
        for (number, event) in events.enumerated() {
            let at = Self.finite(event.at) ?? 0
            let start = String(format: "%.1f", position(at))
            svg +=
                "<g class=\"mark link-state \(event.kind.rawValue)\" data-at=\"\(Self.number(at))\">"
                + "<title>+\(Self.number(at))s "
                + "\(Self.escape(String(event.detail.prefix(160))))</title>"
            switch event.kind {
            case .link:
                let until = position(phaseEnds[number] ?? end)
                svg += Self.phaseSpan(event.detail, from: position(at), to: until, top: top)
            case .fault, .captive:
                let row = event.kind == .fault ? 17.0 : 26.0
                svg += "<rect x=\"\(start)\" y=\"\(Int(top + row))\" width=\"3\" height=\"7\"/>"
            }
            svg += "</g>\n"
        }
        return svg
    }

    /// A phase of the link (`link: lte, outage (blackhole)`) as a span, named where the name fits.
    static func phaseSpan(_ detail: String, from start: Double, to until: Double, top: Double) -> String {
        let width = max(2, until - start)
        let state = detail.hasPrefix("link: ") ? String(detail.dropFirst(6)) : detail
        let look = state.contains("outage") ? " outage" : state.contains("stall") ? " stall" : ""
        let x = String(format: "%.1f", start)
        var svg =
            "<rect class=\"span\(look)\" x=\"\(x)\" y=\"\(Int(top))\" "
            + "width=\"\(String(format: "%.1f", width))\" height=\"12\"/>"
        let room = Int((width - 6) / 6)
        if room >= 4 {
            let shown = state.count > room ? String(state.prefix(room - 1)) + "…" : state
            svg += "<text class=\"span-label\" x=\"\(x)\" dx=\"3\" y=\"\(Int(top + 9))\">\(Self.escape(shown))</text>"
        }
        return svg
    }

    /// The bytes delivered to the client over time, with its scale on the left.
    static func bytesLane(_ delivered: [(Double, Double)], top: Double, x: (Double) -> String) -> (
        line: String, scale: String
    ) {
        guard let most = delivered.map(\.1).max(), most > 0 else { return ("", "") }
        let every = max(1, Int((Double(delivered.count) / Double(Self.maxDeliveredPoints)).rounded(.up)))
        let drawn = delivered.enumerated().filter { $0.offset % every == 0 || $0.offset == delivered.count - 1 }.map(
            \.element)
        let bottom = top + 60
        let points = drawn.map { "\(x($0.0)),\(String(format: "%.1f", bottom - 60 * $0.1 / most))" }.joined(
            separator: " ")
        let line =
            "<polyline class=\"delivered\" points=\"\(points)\"><title>bytes delivered to the client, up to "
            + "\(Self.number(most))</title></polyline>\n"
        let axis = String(format: "%.1f", Self.plotLeft)
        var scale = "<line class=\"scale\" x1=\"\(axis)\" x2=\"\(axis)\" y1=\"\(Int(top))\" y2=\"\(Int(bottom))\"/>"
        scale +=
            "<text class=\"scale-label\" x=\"\(Int(Self.plotLeft - 4))\" y=\"\(Int(top + 8))\">\(Self.bytesText(most))</text>"
        scale += "<text class=\"scale-label\" x=\"\(Int(Self.plotLeft - 4))\" y=\"\(Int(bottom))\">0</text>\n"
        return (line, scale)
    }

    /// `1.4 MB`, `320 KB`, `512 B` (powers of 1,024, as the origin's sizes are written).
    static func bytesText(_ bytes: Double) -> String {
        let bytes = max(0, bytes)  // a report made by hand may say anything
        if bytes >= 1_048_576 { return String(format: "%.1f MB", bytes / 1_048_576) }
        if bytes >= 1024 { return String(format: "%.0f KB", bytes / 1024) }
        return String(format: "%.0f B", bytes)
    }

    /// What the colours mean (below each timeline).
    static let legend = """
        <p class="legend"><span class="key request-ok"></span>response <span class="key request-wait"></span>waiting on the server \
        <span class="key request-range"></span>ranged (206) <span class="key request-broken"></span>error, cut short or not received \
        <span class="key request-portal"></span>the captive portal's page, not the data \
        <span class="key attempt-key"></span>attempt that reached no server (gaps between attempts beside; red: sooner \
        than the server's <span class="key retry-key"></span>Retry-After asked) \
        <span class="key span-key"></span>link phase <span class="key span-outage"></span>outage <span class="key span-stall"></span>stall \
        <span class="key event-key"></span>timeline event <span class="key deadline-key"></span>deadline \
        <span class="key delivered-key"></span>bytes delivered · drag across the timeline to zoom in, double-click to see the whole run</p>

        """
}
