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

    /// Lanes, top to bottom: the timeline's events, the link, its rate and delay, requests, failed
    /// attempts with the gaps between attempts, bytes delivered, output lines; the time axis below.
    static func timeline(_ scenario: [String: Any], index: Int) -> String {
        // The requests the origin saw, and those the captive portal answered in its place (its
        // login page where the client expected data), in the order they came.
        let requests = ((scenario["requests"] as? [[String: Any]] ?? []) + Self.portalAnswers(scenario["events"]))
            .sorted { (Self.double($0["at"]) ?? 0) < (Self.double($1["at"]) ?? 0) }
        let applied = scenario["timeline"] as? [[String: Any]] ?? []
        let attempts = scenario["attempts"] as? [[String: Any]] ?? []
        let delivered = (scenario["delivered"] as? [[Any]] ?? []).compactMap { pair -> (Double, Double)? in
            guard pair.count == 2, let at = Self.double(pair[0]), let bytes = Self.double(pair[1]) else { return nil }
            return (at, bytes)
        }
        let lines = (scenario["output"] as? [[String: Any]] ?? []).suffix(Self.maxLinesDrawn)
        let events = Array((scenario["events"] as? [[String: Any]] ?? []).prefix(Self.maxLinesDrawn * 2))
        var end = Self.double(scenario["seconds"]) ?? 0
        for request in requests { end = max(end, Self.double(request["received"]) ?? Self.double(request["ended"]) ?? Self.double(request["at"]) ?? 0) }
        for event in applied { end = max(end, Self.double(event["at"]) ?? 0) }
        // A report's times are its own; one made by hand may hold any number (1e308 once drew forever).
        end = min(max(end, 0.1), Self.longestRun) * 1.02
        let left = Self.plotLeft, right = Self.plotRight
        func position(_ at: Double) -> Double { left + (right - left) * min(max(at, 0), end) / end }
        func x(_ at: Double) -> String { String(format: "%.1f", position(at)) }

        // The timeline's labels, each in the first of three rows where it does not overlap the one before.
        var labelRows: [Double] = [-1e9, -1e9, -1e9]
        var placed: [(event: [String: Any], row: Int)] = []
        for event in applied {
            let at = position(Self.double(event["at"]) ?? 0)
            let width = Double(min((event["what"] as? String ?? "").count, 80)) * 6.2 + 8
            let row = labelRows.firstIndex { $0 < at } ?? 0
            labelRows[row] = at + width
            placed.append((event, row))
        }
        let timelineRows = max(1, (placed.map(\.row).max() ?? 0) + 1)

        // Requests: one labelled row each, or packed (a row takes a request once its last one ended).
        let labelled = requests.count <= Self.labelledRequests
        var rowOf: [Int] = []
        if labelled {
            rowOf = Array(requests.indices)
        } else {
            var rowEnds: [Double] = []
            for request in requests {
                let at = Self.double(request["at"]) ?? 0
                let ended = max(Self.double(request["received"]) ?? Self.double(request["ended"]) ?? end, at) + end / 200
                if let row = rowEnds.firstIndex(where: { $0 <= at }) ?? (rowEnds.count < Self.maxRequestRows ? nil : rowEnds.indices.min { rowEnds[$0] < rowEnds[$1] }) {
                    rowEnds[row] = ended
                    rowOf.append(row)
                } else {
                    rowEnds.append(ended)
                    rowOf.append(rowEnds.count - 1)
                }
            }
        }
        let requestRows = max(1, (rowOf.max() ?? 0) + 1)
        let rowHeight = labelled ? 14.0 : 8.0

        var y = 8.0
        let lane = (
            timeline: y, link: { y += 14 * Double(timelineRows) + 8; return y }(), rate: { y += 34; return y }(),
            requests: { y += 44; return y }(), attempts: { y += rowHeight * Double(requestRows) + 8; return y }(),
            bytes: { y += 46; return y }(), output: { y += 70; return y }(), axis: { y += 28; return y }()
        )
        let height = lane.axis + 22

        // Three parts: what stays put (lane names, request labels, scales), the time axis, and what
        // sits on it (redrawn, or moved, when the reader zooms: see `zoomScript`).
        var fixed = "", ticks = "", svg = ""
        for (label, top) in [("timeline", lane.timeline), ("link", lane.link), ("rate, delay", lane.rate), ("attempts", lane.attempts),
                             ("bytes", lane.bytes), ("output", lane.output)] {
            fixed += "<text class=\"lane\" x=\"4\" y=\"\(Int(top + 12))\">\(label)</text>"
        }
        if !labelled || requests.isEmpty {
            fixed += "<text class=\"lane\" x=\"4\" y=\"\(Int(lane.requests + 12))\">requests"
                + (requests.isEmpty ? " (none)" : " (\(requests.count), packed)") + "</text>"
        }
        ticks += Self.timeAxis(end: end, x: x, lineClass: "tick", from: lane.timeline, to: lane.axis, labelY: Int(lane.axis + 14))
        fixed += "<text class=\"lane axis-name\" x=\"4\" y=\"\(Int(lane.axis + 14))\">seconds since the client started</text>\n"
        for (event, row) in placed {
            let at = Self.double(event["at"]) ?? 0
            let what = event["what"] as? String ?? ""
            let shown = what.count > 80 ? String(what.prefix(79)) + "…" : what
            svg += "<g class=\"mark link-event\" data-at=\"\(Self.number(at))\"><title>+\(Self.number(at))s \(Self.escape(what))</title>"
            svg += "<line x1=\"\(x(at))\" x2=\"\(x(at))\" y1=\"\(lane.timeline)\" y2=\"\(lane.output + 20)\"/>"
            svg += "<text x=\"\(x(at))\" dx=\"3\" y=\"\(Int(lane.timeline + 10 + 14 * Double(row)))\">"
                + "\(Self.escape(shown))</text></g>\n"
        }
        svg += Self.linkStates(events, top: lane.link, end: end, position: position)
        svg += Self.linkLane(scenario["link"] as? [[Any]] ?? [], top: lane.rate, end: end, x: x)
        for (number, request) in requests.enumerated() {
            let row = Self.requestRow(request, top: lane.requests + rowHeight * Double(rowOf[number]), height: rowHeight - 3,
                                      labelled: labelled, end: end, position: position)
            svg += row.bar
            fixed += row.label
        }
        svg += Self.attemptLane(attempts, requests: requests.filter { $0["portal"] == nil }, top: lane.attempts, position: position)
        let bytes = Self.bytesLane(delivered, top: lane.bytes, x: x)
        svg += bytes.line
        fixed += bytes.scale
        for line in lines {
            let at = Self.double(line["at"]) ?? 0
            let text = String((line["text"] as? String ?? "").prefix(Self.maxLineCharacters))
            let stream = line["stderr"] as? Bool == true ? "stderr" : "stdout"
            svg += "<g class=\"mark output \(stream)\" data-at=\"\(Self.number(at))\"><title>+\(Self.number(at))s \(stream): "
                + "\(Self.escape(text))</title><path d=\"M\(x(at)) \(Int(lane.output))v16\"/></g>\n"
        }
        // Each check's moments, shown when the check is picked.
        for check in scenario["checks"] as? [[String: Any]] ?? [] {
            let name = Self.escape(check["name"] as? String ?? "")
            for mark in check["marks"] as? [Any] ?? [] {
                guard let at = Self.double(mark) else { continue }
                svg += "<line class=\"check-mark\" data-check=\"\(name)\" data-at=\"\(Self.number(at))\" x1=\"\(x(at))\" "
                    + "x2=\"\(x(at))\" y1=\"\(lane.timeline)\" y2=\"\(lane.axis)\"/>"
            }
        }
        if let deadline = Self.double(scenario["deadline"]), deadline <= end {
            svg += "<g class=\"mark deadline\" data-at=\"\(Self.number(deadline))\"><title>the client's deadline, "
                + "+\(Self.number(deadline))s</title><line x1=\"\(x(deadline))\" x2=\"\(x(deadline))\" y1=\"\(lane.timeline)\" "
                + "y2=\"\(lane.axis)\"/><text x=\"\(x(deadline))\" dx=\"-3\" y=\"\(Int(lane.axis - 4))\" "
                + "class=\"deadline-label\">deadline</text></g>"
        }
        let clip = "<defs><clipPath id=\"clip-\(index)\"><rect x=\"\(Int(left - 1))\" y=\"0\" width=\"\(Int(right - left + 2))\" "
            + "height=\"\(Int(height))\"/></clipPath></defs>\n"
        return "<svg class=\"timeline\" id=\"timeline-\(index)\" viewBox=\"0 0 \(Int(Self.viewWidth)) \(Int(height))\" width=\"100%\" "
            + "role=\"img\" aria-label=\"timeline\" data-end=\"\(Self.number(end))\" data-left=\"\(Int(left))\" data-right=\"\(Int(right))\" "
            + "data-axis=\"\(Int(lane.axis))\" data-top=\"\(Int(lane.timeline))\">\n" + clip + fixed
            + "<g class=\"axis-ticks\" clip-path=\"url(#clip-\(index))\">" + ticks + "</g>\n"
            + "<g class=\"zoomable\" clip-path=\"url(#clip-\(index))\">\n" + svg + "</g>\n"
            + "<rect class=\"brush\" x=\"0\" y=\"0\" width=\"0\" height=\"\(Int(height))\"/></svg>\n" + Self.legend
    }

    /// A time axis: about eight ticks at round seconds from 0 to `end`, each a line from `top` to
    /// `bottom` and a label (`2.5s`) at `labelY`.
    static func timeAxis(end: Double, x: (Double) -> String, lineClass: String, from top: Double, to bottom: Double, labelY: Int)
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
    static func linkStates(_ events: [[String: Any]], top: Double, end: Double, position: (Double) -> Double) -> String {
        var svg = ""
        // Where each phase ends: where the next one begins (the last, at the end).
        var phaseEnds: [Int: Double] = [:]
        var open: Int?
        for (number, event) in events.enumerated() where (event["kind"] as? String ?? "link") == "link" {
            if let open { phaseEnds[open] = Self.double(event["at"]) ?? end }
            open = number
        }
        for (number, event) in events.enumerated() {
            let at = Self.double(event["at"]) ?? 0
            let kind = event["kind"] as? String ?? "link"
            let detail = event["detail"] as? String ?? ""
            let start = String(format: "%.1f", position(at))
            svg += "<g class=\"mark link-state \(Self.escape(kind))\" data-at=\"\(Self.number(at))\"><title>+\(Self.number(at))s "
                + "\(Self.escape(String(detail.prefix(160))))</title>"
            if kind == "link" {
                let until = phaseEnds[number] ?? end
                let width = max(2, position(until) - position(at))
                let state = detail.hasPrefix("link: ") ? String(detail.dropFirst(6)) : detail
                let look = state.contains("outage") ? " outage" : state.contains("stall") ? " stall" : ""
                svg += "<rect class=\"span\(look)\" x=\"\(start)\" y=\"\(Int(top))\" width=\"\(String(format: "%.1f", width))\" height=\"12\"/>"
                let room = Int((width - 6) / 6)
                if room >= 4 {
                    let shown = state.count > room ? String(state.prefix(room - 1)) + "…" : state
                    svg += "<text class=\"span-label\" x=\"\(start)\" dx=\"3\" y=\"\(Int(top + 9))\">"
                        + "\(Self.escape(shown))</text>"
                }
            } else {
                let row = kind == "fault" ? 17.0 : 26.0
                svg += "<rect x=\"\(start)\" y=\"\(Int(top + row))\" width=\"3\" height=\"7\"/>"
            }
            svg += "</g>\n"
        }
        return svg
    }

    /// The requests the captive portal answered (events `portal answered 200: GET http://host/path`),
    /// as request rows marked `portal`.
    static func portalAnswers(_ events: Any?) -> [[String: Any]] {
        (events as? [[String: Any]] ?? []).compactMap { event -> [String: Any]? in
            guard event["kind"] as? String == "captive", let detail = event["detail"] as? String,
                detail.hasPrefix("portal answered "), let at = Self.double(event["at"])
            else { return nil }
            let rest = detail.dropFirst("portal answered ".count)
            guard let colon = rest.firstIndex(of: ":"), let status = Int(rest[..<colon]) else { return nil }
            let words = rest[rest.index(after: colon)...].split(separator: " ", maxSplits: 1).map(String.init)
            guard words.count == 2 else { return nil }
            let url = words[1]
            var path = url
            if let scheme = url.range(of: "://"), let slash = url[scheme.upperBound...].firstIndex(of: "/") {
                path = String(url[slash...])
            }
            return ["at": at, "method": words[0], "path": path, "url": url, "status": status, "portal": true]
        }
    }

    /// One request: its label (method, path, status, `Range`, bytes) in the left column when rows
    /// are labelled; its bar from arrival to the end of its response, the part before the response
    /// head (waiting on the server) lighter, coloured by outcome.
    static func requestRow(
        _ request: [String: Any], top: Double, height: Double, labelled: Bool, end: Double, position: (Double) -> Double
    ) -> (bar: String, label: String) {
        let at = Self.double(request["at"]) ?? 0
        let status = (request["status"] as? Int).map(String.init) ?? "no answer"
        let method = request["method"] as? String ?? ""
        let path = request["path"] as? String ?? ""
        if request["portal"] != nil {
            // The portal's answer: its login page, where the client asked for data.
            let title = "+\(Self.number(at))s \(method) \(request["url"] as? String ?? path) → \(status) from the captive portal: "
                + "its login page, not what was asked for"
            let start = position(at)
            var label = ""
            if labelled {
                let text = "\(method) \(path) \(status) · login page"
                label = "<text class=\"request-label portal\" x=\"4\" y=\"\(Int(top + height - 1))\">"
                    + "\(Self.escape(text.count > 40 ? String(text.prefix(39)) + "…" : text))</text>\n"
            }
            let bar = "<g class=\"mark request portal\" data-at=\"\(Self.number(at))\"><title>\(Self.escape(title))</title>"
                + "<rect x=\"\(String(format: "%.1f", start))\" y=\"\(Int(top))\" height=\"\(Int(height))\" width=\"6\" data-w=\"6\"/></g>\n"
            return (bar, label)
        }
        // The bar ends when the response's last byte reached the client (what the link held
        // included); for one still on its way when the run ended, at the run's end; else when the
        // origin finished it.
        let ended = Self.double(request["received"])
            ?? (request["stoppedByRunEnd"] as? Bool == true ? end / 1.02 : nil) ?? Self.double(request["ended"])
        let responded = Self.double(request["responded"])
        var title = "+\(Self.number(at))s \(method) \(path) → \(status)"
        if let range = request["range"] as? String { title += ", Range: \(range)" }
        if let key = request["idempotencyKey"] as? String { title += ", Idempotency-Key: \(key)" }
        title += ", \(Self.number(request["bodyBytes"])) bytes"
        if let received = request["bodyBytesReceived"] { title += " (\(Self.number(received)) reached the client)" }
        if let cut = request["linkCut"] as? String { title += ", the link \(cut == "reset" ? "reset" : "closed") it" }
        if request["stoppedByRunEnd"] as? Bool == true {
            title += ", the rest still on its way when the run ended"
        } else if request["cutShort"] as? Bool == true {
            title += ", cut short"
        }
        if let responded, responded > at { title += ", waited \(Self.number(((responded - at) * 1000).rounded() / 1000))s for the server" }
        if let received = Self.double(request["received"]) {
            title += ", sent by +\(Self.number(Self.double(request["ended"]) ?? received))s, its last byte at the client +\(Self.number(received))s"
        } else if let ended {
            title += ", ended +\(Self.number(ended))s"
        }
        let broken = (request["status"] as? Int ?? 599) >= 400 || request["cutShort"] as? Bool == true
            || request["bodyBytesReceived"] != nil || request["linkCut"] != nil
        let classes = "mark request" + (request["range"] != nil ? " range" : "") + (broken ? " broken" : "")
        let start = position(at)
        let stop = max(position(ended ?? end), start + 2)
        var svg = "<g class=\"\(classes)\" data-at=\"\(Self.number(at))\"" + (ended.map { " data-ended=\"\(Self.number($0))\"" } ?? "")
            + "><title>\(Self.escape(title))</title><rect x=\"\(String(format: "%.1f", start))\" y=\"\(Int(top))\" height=\"\(Int(height))\" width=\""
            + String(format: "%.1f", stop - start) + "\" data-w=\"\(String(format: "%.3f", max(0, position(ended ?? end) - start)))\"/>"
        if let responded, responded > at {
            let waitEnd = min(max(position(responded), start), stop)
            if waitEnd - start >= 1 {
                svg += "<rect class=\"wait\" x=\"\(String(format: "%.1f", start))\" y=\"\(Int(top))\" height=\"\(Int(height))\" "
                    + "width=\"\(String(format: "%.1f", waitEnd - start))\" data-w=\"\(String(format: "%.3f", waitEnd - start))\"/>"
            }
        }
        var text = ""
        if labelled {
            var label = "\(method) \(path) " + ((request["status"] as? Int).map(String.init) ?? "no answer")
            if let range = request["range"] as? String { label += " " + range.replacingOccurrences(of: "bytes=", with: "") }
            label += " · " + Self.bytesText(Self.double(request["bodyBytesReceived"]) ?? Self.double(request["bodyBytes"]) ?? 0)
            if request["stoppedByRunEnd"] as? Bool == true {
                label += " · unfinished"
            } else if request["cutShort"] as? Bool == true || request["linkCut"] != nil {
                label += " · cut"
            }
            let shown = label.count > 40 ? String(label.prefix(39)) + "…" : label
            text = "<text class=\"request-label\(broken ? " broken" : "")\" x=\"4\" y=\"\(Int(top + height - 1))\">"
                + "\(Self.escape(shown))</text>\n"
        }
        return (svg + "</g>\n", text)
    }

    /// Attempts that reached no server (●); between consecutive attempts of any kind (those that
    /// reached the origin too) the gap, labelled with its length while there are few; and after a
    /// response that asked for a wait (`Retry-After` in seconds) that wait, as a bar the next
    /// attempt should not come before: a client's backoff, or its lack, at a glance.
    static func attemptLane(_ attempts: [[String: Any]], requests: [[String: Any]], top: Double, position: (Double) -> Double) -> String {
        var svg = ""
        for attempt in attempts {
            let at = Self.double(attempt["at"]) ?? 0
            let title = "+\(Self.number(at))s \(attempt["outcome"] as? String ?? "") \(attempt["host"] as? String ?? ""):\(Self.number(attempt["port"]))"
            svg += "<g class=\"mark attempt\" data-at=\"\(Self.number(at))\"><title>\(Self.escape(title))</title>"
                + "<circle cx=\"\(String(format: "%.1f", position(at)))\" cy=\"\(Int(top + 10))\" r=\"4\"/></g>\n"
        }
        // Waits the server asked for, by the moment of the attempt whose response asked.
        var asked: [Double: (from: Double, wait: Double)] = [:]
        for (number, request) in requests.prefix(Self.maxGapLabels).enumerated() {
            guard let text = request["retryAfter"] as? String, let wait = Double(text.trimmingCharacters(in: .whitespaces)), wait > 0,
                let at = Self.double(request["at"])
            else { continue }
            let from = Self.double(request["ended"]) ?? at
            asked[at] = (from, wait)
            let row = top + 28 + Double(number % 2) * 5
            svg += "<g class=\"retry-after\"><title>the response at +\(Self.number(from))s asked the client to wait \(Self.number(wait))s "
                + "(Retry-After): until +\(Self.number(from + wait))s</title><rect x=\"\(String(format: "%.1f", position(from)))\" "
                + "y=\"\(Int(row))\" height=\"3\" width=\"\(String(format: "%.1f", max(1, position(from + wait) - position(from))))\"/>"
                + "<rect class=\"until\" x=\"\(String(format: "%.1f", position(from + wait) - 1))\" y=\"\(Int(row - 3))\" height=\"9\" width=\"2\"/>"
                + "</g>\n"
        }
        let times = (attempts.compactMap { Self.double($0["at"]) } + requests.compactMap { Self.double($0["at"]) }).sorted()
        guard times.count >= 2, times.count - 1 <= Self.maxGapLabels else { return svg }
        for (a, b) in zip(times, times.dropFirst()) where position(b) - position(a) >= 4 {
            let gap = ((b - a) * 100).rounded() / 100
            var label = "\(Self.number(gap))s"
            var early = false
            if let wait = asked[a] {
                label += ", asked \(Self.number(wait.wait))s"
                early = b < wait.from + wait.wait
            }
            svg += "<g class=\"gap\(early ? " early" : "")\"><title>\(label) between attempts\(early ? ": sooner than the server asked" : "")</title>"
                + "<line x1=\"\(String(format: "%.1f", position(a) + 4))\" x2=\"\(String(format: "%.1f", position(b) - 4))\" "
                + "data-o-x1=\"\(String(format: "%.1f", position(a)))\" data-dx1=\"4\" data-o-x2=\"\(String(format: "%.1f", position(b)))\" data-dx2=\"-4\" "
                + "y1=\"\(Int(top + 10))\" y2=\"\(Int(top + 10))\"/>"
            if position(b) - position(a) >= Double(label.count) * 5.5 + 6 {
                svg += "<text x=\"\(String(format: "%.1f", (position(a) + position(b)) / 2))\" y=\"\(Int(top + 24))\">"
                    + "\(label)</text>"
            }
            svg += "</g>\n"
        }
        return svg
    }

    /// The bytes delivered to the client over time, with its scale on the left.
    static func bytesLane(_ delivered: [(Double, Double)], top: Double, x: (Double) -> String) -> (line: String, scale: String) {
        guard let most = delivered.map(\.1).max(), most > 0 else { return ("", "") }
        let every = max(1, Int((Double(delivered.count) / Double(Self.maxDeliveredPoints)).rounded(.up)))
        let drawn = delivered.enumerated().filter { $0.offset % every == 0 || $0.offset == delivered.count - 1 }.map(\.element)
        let bottom = top + 60
        let points = drawn.map { "\(x($0.0)),\(String(format: "%.1f", bottom - 60 * $0.1 / most))" }.joined(separator: " ")
        let line = "<polyline class=\"delivered\" points=\"\(points)\"><title>bytes delivered to the client, up to "
            + "\(Self.number(most))</title></polyline>\n"
        let axis = String(format: "%.1f", Self.plotLeft)
        var scale = "<line class=\"scale\" x1=\"\(axis)\" x2=\"\(axis)\" y1=\"\(Int(top))\" y2=\"\(Int(bottom))\"/>"
        scale += "<text class=\"scale-label\" x=\"\(Int(Self.plotLeft - 4))\" y=\"\(Int(top + 8))\">\(Self.bytesText(most))</text>"
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
