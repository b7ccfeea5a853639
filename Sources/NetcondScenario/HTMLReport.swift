import Foundation
import NetcondCore

/// `--html FILE` and `netcond report FILE.json --html OUT`: one self-contained HTML file drawn from
/// a JSON report (format 2): the suite at a glance (sortable, filterable by verdict), and for each
/// scenario a timeline on one time axis — what the timeline did, what the link recorded of itself
/// (its phases, stalls, outages and cuts, faults applied, the portal), every request as a bar
/// from its start to the end of its response, every connection attempt that never reached a server,
/// the bytes delivered to the client over time, the client's output lines — with its checks, each
/// linked to the moments its verdict rests on, and the command that repeats the run. Inline SVG,
/// CSS and a little script: no network, no CDN. Every text from the run is escaped, the client's
/// output included.
public enum HTMLReport {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Output lines drawn per scenario (the last ones), characters of each, and points of the
    /// delivered-bytes line: a 100-scenario report stays under 5 MB (bench item 10).
    static let maxLinesDrawn = 100
    static let maxLineCharacters = 100
    static let maxDeliveredPoints = 400

    /// The page for a JSON report (`data`, read from `source`, named in errors).
    public static func render(json data: Data, source: String) throws(Failure) -> String {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw Failure(description: "\(source): not JSON (it may be truncated); a report is written by netcond test --json or netcond run --json")
        }
        guard let report = object as? [String: Any], let scenarios = report["scenarios"] as? [[String: Any]] else {
            throw Failure(description: "\(source): not a netcond JSON report (no \"scenarios\" list)")
        }
        let format = report["format"] as? Int
        guard format == ScenarioSuite.JSONReport.currentFormat else {
            let found = format.map { "format \($0)" } ?? "no format (an older netcond)"
            throw Failure(description: "\(source): a report of \(found); this netcond draws format \(ScenarioSuite.JSONReport.currentFormat): run the scenarios again with this netcond")
        }
        return Self.page(report: report, scenarios: scenarios)
    }

    // MARK: - The page

    static func page(report: [String: Any], scenarios: [[String: Any]]) -> String {
        let passed = scenarios.filter { $0["verdict"] as? String == "passed" }.count
        let failed = scenarios.filter { $0["verdict"] as? String == "failed" }.count
        let errors = scenarios.count - passed - failed
        var html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        html += "<title>netcond: \(passed) of \(scenarios.count) scenarios passed</title><style>\(Self.style)</style></head><body>\n"
        html += "<h1>netcond: \(scenarios.count) scenario\(scenarios.count == 1 ? "" : "s"), <span class=\"passed\">\(passed) passed</span>"
        if failed > 0 { html += ", <span class=\"failed\">\(failed) failed</span>" }
        if errors > 0 { html += ", <span class=\"error\">\(errors) could not run</span>" }
        html += "</h1>\n"
        if let shard = report["shard"] as? String { html += "<p>Part \(Self.escape(shard)) of a sharded run.</p>\n" }
        html += "<p><label>Show <select id=\"verdict-filter\"><option value=\"\">every verdict</option>"
        html += "<option value=\"failed\">failed</option><option value=\"passed\">passed</option><option value=\"error\">could not run</option>"
        html += "</select></label></p>\n<table id=\"suite\"><thead><tr>"
        for (index, column) in ["scenario", "verdict", "duration (s)", "seed", "first failed check"].enumerated() {
            html += "<th data-column=\"\(index)\" title=\"sort\">\(column)</th>"
        }
        html += "</tr></thead><tbody>\n"
        for (index, scenario) in scenarios.enumerated() {
            let verdict = scenario["verdict"] as? String ?? "error"
            let checks = scenario["checks"] as? [[String: Any]] ?? []
            let firstFailed = checks.first { $0["passed"] as? Bool == false }
            let why = firstFailed.map { "\($0["name"] as? String ?? ""): \($0["evidence"] as? String ?? "")" } ?? (scenario["error"] as? String ?? "")
            html += "<tr class=\"row\" data-verdict=\"\(Self.escape(verdict))\">"
            html += "<td><a href=\"#scenario-\(index)\">\(Self.escape(scenario["name"] as? String ?? "?"))</a></td>"
            html += "<td class=\"\(Self.escape(verdict))\">\(Self.escape(verdict))</td>"
            html += "<td>\(Self.number(scenario["seconds"]))</td><td>\(Self.number(scenario["seed"]))</td>"
            html += "<td>\(Self.escape(why))</td></tr>\n"
        }
        html += "</tbody></table>\n"
        for (index, scenario) in scenarios.enumerated() {
            html += Self.section(scenario, index: index)
        }
        html += "<script>\(Self.script)</script>\n</body></html>\n"
        return html
    }

    static func section(_ scenario: [String: Any], index: Int) -> String {
        let name = scenario["name"] as? String ?? "?"
        let verdict = scenario["verdict"] as? String ?? "error"
        var html = "<section class=\"scenario\" id=\"scenario-\(index)\" data-verdict=\"\(Self.escape(verdict))\">\n"
        html += "<h2><span class=\"\(Self.escape(verdict))\">\(verdict == "passed" ? "✓" : verdict == "failed" ? "✗" : "!")</span> "
            + "\(Self.escape(name))</h2>\n"
        var facts = ["profile \(scenario["profile"] as? String ?? "?")"]
        if let engine = scenario["engine"] as? String { facts.append("\(engine) engine") }
        if let sender = scenario["sender"] as? String { facts.append(sender) }
        if let exit = scenario["exit"] as? String { facts.append(exit) }
        if let seconds = scenario["seconds"] { facts.append("\(Self.number(seconds)) s") }
        if scenario["timedOut"] as? Bool == true { facts.append("stopped at its deadline") }
        html += "<p class=\"facts\">\(Self.escape(facts.joined(separator: " · ")))</p>\n"
        if let error = scenario["error"] as? String {
            html += "<p class=\"error\">\(Self.escape(error))</p>\n</section>\n"
            return html
        }
        html += Self.timeline(scenario, index: index)
        html += "<ul class=\"checks\">\n"
        for check in scenario["checks"] as? [[String: Any]] ?? [] {
            let passed = check["passed"] as? Bool == true
            let marks = (check["marks"] as? [Any] ?? []).map { Self.number($0) }.joined(separator: " ")
            html += "<li class=\"check \(passed ? "passed" : "failed")\"><a href=\"#timeline-\(index)\" class=\"check-link\" "
                + "data-scenario=\"\(index)\" data-marks=\"\(marks)\">\(passed ? "✓" : "✗") \(Self.escape(check["name"] as? String ?? "?"))</a> — "
                + Self.escape(check["evidence"] as? String ?? "")
            if let caveat = check["caveat"] as? String { html += " <span class=\"caveat\">⚠ \(Self.escape(caveat))</span>" }
            html += "</li>\n"
        }
        html += "</ul>\n"
        if let output = scenario["clientOutput"] as? String, !output.isEmpty {
            html += "<details><summary>The end of the client's output</summary><pre>\(Self.escape(output))</pre></details>\n"
        }
        html += "<p class=\"repeat\">Repeat: <code>\(Self.escape(Self.repeatCommand(scenario)))</code></p>\n</section>\n"
        return html
    }

    static func repeatCommand(_ scenario: [String: Any]) -> String {
        var words = ["netcond", "run", scenario["file"] as? String ?? "?"]
        if scenario["engine"] as? String == "packet" { words += ["--engine", "packet"] }
        if let seed = scenario["seed"] { words += ["--seed", Self.number(seed)] }
        if let command = scenario["command"] as? [String], command != ["(in-process client)"] {
            words += ["--"] + command
        }
        return ScenarioReport.shellLine(words)
    }

    // MARK: - The timeline

    /// Lanes, top to bottom: the link (what the timeline did), the down link's rate and delay as
    /// they moved (a trace's, a step series', a switch's), requests, failed attempts, bytes
    /// delivered, output lines; the time axis below. x is seconds since the client started.
    static func timeline(_ scenario: [String: Any], index: Int) -> String {
        let requests = scenario["requests"] as? [[String: Any]] ?? []
        let applied = scenario["timeline"] as? [[String: Any]] ?? []
        let attempts = scenario["attempts"] as? [[String: Any]] ?? []
        let delivered = (scenario["delivered"] as? [[Any]] ?? []).compactMap { pair -> (Double, Double)? in
            guard pair.count == 2, let at = Self.double(pair[0]), let bytes = Self.double(pair[1]) else { return nil }
            return (at, bytes)
        }
        let lines = (scenario["output"] as? [[String: Any]] ?? []).suffix(Self.maxLinesDrawn)
        var end = Self.double(scenario["seconds"]) ?? 0
        for request in requests { end = max(end, Self.double(request["ended"]) ?? Self.double(request["at"]) ?? 0) }
        for event in applied { end = max(end, Self.double(event["at"]) ?? 0) }
        // A report's times are its own; one made by hand may hold any number (1e308 once drew forever).
        end = min(max(end, 0.1), Self.longestRun) * 1.02
        let width = 1000.0, left = 90.0, right = 10.0
        let lane = (timeline: 10.0, link: 40.0, rate: 70.0, requests: 110.0, attempts: 180.0, bytes: 210.0, output: 280.0, axis: 310.0)
        let height = 332.0
        func x(_ at: Double) -> String { String(format: "%.1f", left + (width - left - right) * min(max(at, 0), end) / end) }

        var svg = "<svg class=\"timeline\" id=\"timeline-\(index)\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" "
            + "width=\"100%\" role=\"img\" aria-label=\"timeline\">\n"
        for (label, y) in [("timeline", lane.timeline), ("link", lane.link), ("rate, delay", lane.rate), ("requests", lane.requests), ("no server", lane.attempts),
                           ("bytes", lane.bytes), ("output", lane.output)] {
            svg += "<text class=\"lane\" x=\"4\" y=\"\(Int(y + 14))\">\(label)</text>"
        }
        // The axis: about eight ticks at round seconds.
        let step = Self.tickStep(end)
        var tick = 0.0
        for _ in 0..<100 where tick <= end {
            svg += "<line class=\"tick\" x1=\"\(x(tick))\" x2=\"\(x(tick))\" y1=\"\(lane.timeline)\" y2=\"\(lane.axis)\"/>"
            svg += "<text class=\"axis\" x=\"\(x(tick))\" y=\"\(Int(lane.axis + 14))\">\(Self.number(tick))s</text>"
            tick += step
        }
        svg += "\n"
        for event in applied {
            let at = Self.double(event["at"]) ?? 0
            let what = event["what"] as? String ?? ""
            svg += "<g class=\"mark link-event\" data-at=\"\(Self.number(at))\"><title>+\(Self.number(at))s \(Self.escape(what))</title>"
            svg += "<line x1=\"\(x(at))\" x2=\"\(x(at))\" y1=\"\(lane.timeline)\" y2=\"\(lane.output + 20)\"/>"
            svg += "<text x=\"\(x(at))\" y=\"\(Int(lane.timeline + 24))\">\(Self.escape(String(what.prefix(40))))</text></g>\n"
        }
        // What the link recorded of itself: its phases, stalls, outages and cuts, faults applied, the portal.
        for event in (scenario["events"] as? [[String: Any]] ?? []).prefix(Self.maxLinesDrawn * 2) {
            let at = Self.double(event["at"]) ?? 0
            let kind = event["kind"] as? String ?? "link"
            let detail = event["detail"] as? String ?? ""
            let row = kind == "link" ? 0.0 : kind == "fault" ? 9.0 : 18.0
            svg += "<g class=\"mark link-state \(Self.escape(kind))\" data-at=\"\(Self.number(at))\"><title>+\(Self.number(at))s "
                + "\(Self.escape(String(detail.prefix(160))))</title><rect x=\"\(x(at))\" y=\"\(Int(lane.link + row))\" width=\"3\" "
                + "height=\"8\"/></g>\n"
        }
        for (number, request) in requests.enumerated() {
            let at = Self.double(request["at"]) ?? 0
            let ended = Self.double(request["ended"])
            let status = (request["status"] as? Int).map(String.init) ?? "no answer"
            var title = "+\(Self.number(at))s \(request["method"] as? String ?? "") \(request["path"] as? String ?? "") → \(status)"
            if let range = request["range"] as? String { title += ", Range: \(range)" }
            if let key = request["idempotencyKey"] as? String { title += ", Idempotency-Key: \(key)" }
            title += ", \(Self.number(request["bodyBytes"])) bytes"
            if let received = request["bodyBytesReceived"] { title += " (\(Self.number(received)) reached the client)" }
            if let cut = request["linkCut"] as? String { title += ", the link \(cut == "reset" ? "reset" : "closed") it" }
            if request["cutShort"] as? Bool == true { title += ", cut short" }
            if let ended { title += ", ended +\(Self.number(ended))s" }
            let y = lane.requests + Double(number % 6) * 10
            let broken = (request["status"] as? Int ?? 599) >= 400 || request["cutShort"] as? Bool == true
                || request["bodyBytesReceived"] != nil || request["linkCut"] != nil
            let classes = "mark request" + (request["range"] != nil ? " range" : "") + (broken ? " broken" : "")
            let barEnd = max(Double(x(ended ?? end))!, Double(x(at))! + 2)
            svg += "<g class=\"\(classes)\" data-at=\"\(Self.number(at))\"" + (ended.map { " data-ended=\"\(Self.number($0))\"" } ?? "")
                + "><title>\(Self.escape(title))</title><rect x=\"\(x(at))\" y=\"\(Int(y))\" height=\"8\" width=\""
                + String(format: "%.1f", barEnd - Double(x(at))!) + "\"/></g>\n"
        }
        for attempt in attempts {
            let at = Self.double(attempt["at"]) ?? 0
            let title = "+\(Self.number(at))s \(attempt["outcome"] as? String ?? "") \(attempt["host"] as? String ?? ""):\(Self.number(attempt["port"]))"
            svg += "<g class=\"mark attempt\" data-at=\"\(Self.number(at))\"><title>\(Self.escape(title))</title>"
                + "<circle cx=\"\(x(at))\" cy=\"\(Int(lane.attempts + 10))\" r=\"4\"/></g>\n"
        }
        svg += Self.linkLane(scenario["link"] as? [[Any]] ?? [], top: lane.rate, end: end, x: x)
        if let most = delivered.map(\.1).max(), most > 0 {
            let every = max(1, Int((Double(delivered.count) / Double(Self.maxDeliveredPoints)).rounded(.up)))
            let drawn = delivered.enumerated().filter { $0.offset % every == 0 || $0.offset == delivered.count - 1 }.map(\.element)
            let points = drawn.map { "\(x($0.0)),\(String(format: "%.1f", lane.bytes + 60 - 60 * $0.1 / most))" }.joined(separator: " ")
            svg += "<polyline class=\"delivered\" points=\"\(points)\"><title>bytes delivered to the client, up to "
                + "\(Self.number(most))</title></polyline>\n"
        }
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
                + "y2=\"\(lane.axis)\"/></g>"
        }
        return svg + "</svg>\n"
    }

    /// The down link's rate (a solid step line, its top the run's highest rate) and one-way delay
    /// (dashed, its top the highest delay) from the report's `link` samples, with their scales.
    static func linkLane(_ samples: [[Any]], top: Double, end: Double, x: (Double) -> String) -> String {
        let rows = samples.compactMap { row -> (at: Double, rate: Double?, delay: Double)? in
            guard row.count >= 3, let at = Self.double(row[0]), let delay = Self.double(row[2]) else { return nil }
            return (at, Self.double(row[1]), delay)
        }
        guard !rows.isEmpty else { return "" }
        // The scale's line on top, the lines below it: 26 px from top + 12 to top + 38.
        let height = 26.0, bottom = top + 38
        /// A step line through `values` (each 0…1, one per row): it holds each row's value until the next row.
        func steps(_ values: [Double]) -> String {
            func y(_ value: Double) -> String { String(format: "%.1f", bottom - height * value) }
            var points: [String] = []
            for (i, row) in rows.enumerated() {
                if i > 0 { points.append("\(x(row.at)),\(y(values[i - 1]))") }
                points.append("\(x(row.at)),\(y(values[i]))")
            }
            points.append("\(x(end)),\(y(values[values.count - 1]))")
            return points.joined(separator: " ")
        }
        var svg = ""
        var scale: [String] = []
        let rates = rows.compactMap(\.rate)
        if let most = rates.max(), most > 0, rates.count == rows.count {
            let points = steps(rates.map { $0 / most })
            let peak = Bandwidth(bitsPerSecond: Int64(most))
            svg += "<polyline class=\"link-rate\" points=\"\(points)\"><title>the down link's rate, up to \(peak)/s</title></polyline>\n"
            scale.append("rate ▔ \(peak)/s")
        } else {
            scale.append("rate unlimited")
        }
        if let most = rows.map(\.delay).max(), most > 0 {
            let points = steps(rows.map { $0.delay / most })
            svg += "<polyline class=\"link-delay\" points=\"\(points)\"><title>the down link's one-way delay, up to "
                + "\(Self.number(most)) ms</title></polyline>\n"
            scale.append("delay ┄ \(Self.number(most)) ms")
        }
        svg += "<text class=\"link-scale\" x=\"\(x(end))\" y=\"\(Int(top + 9))\">\(Self.escape(scale.joined(separator: " · ")))</text>\n"
        return svg
    }

    /// The longest run a timeline draws (a year); later times are drawn at its end.
    static let longestRun = 365.0 * 86_400

    static func tickStep(_ end: Double) -> Double {
        for step in [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600] where end / step <= 10 { return step }
        return (end / 10).rounded(.up)
    }

    // MARK: - Text

    /// Text safe in an element or an attribute (``Markup``).
    public static func escape(_ text: String) -> String { Markup.escaped(text) }

    /// A finite number of the report (nil for anything else: NaN and infinities are not times).
    static func double(_ value: Any?) -> Double? {
        guard let value = (value as? NSNumber)?.doubleValue, value.isFinite else { return nil }
        return value
    }

    /// A number as a report shows it: whole numbers without a point, others to the millisecond.
    static func number(_ value: Any?) -> String {
        guard let number = Self.double(value) else { return "" }
        if number == number.rounded() && abs(number) < 1e15 { return String(Int64(number)) }
        return String(format: "%.3f", number).replacingOccurrences(of: #"0+$"#, with: "", options: .regularExpression)
    }

    static let style = """
        body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
        table{border-collapse:collapse}th,td{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
        th{cursor:pointer;background:#f4f4f4}.passed{color:#176c2d}.failed{color:#b3261e}.error{color:#8a5300}
        .facts{color:#555}.caveat{color:#8a5300}.checks{list-style:none;padding-left:0}.check{margin:.3em 0}
        .check-link{font-weight:600;text-decoration:none}.check.passed .check-link{color:#176c2d}.check.failed .check-link{color:#b3261e}
        svg.timeline{border:1px solid #ddd;background:#fcfcfc;max-width:1100px}text{font-size:11px;fill:#444}
        .lane{font-weight:600}.axis{text-anchor:middle;fill:#777}.tick{stroke:#eee}
        .link-event line{stroke:#6a4fb3;stroke-dasharray:3 3}.link-event text{fill:#6a4fb3}
        .link-state rect{fill:#6a4fb3}.link-state.fault rect{fill:#e9c46a}.link-state.captive rect{fill:#8a5300}
        .request rect{fill:#5b8def}.request.range rect{fill:#2a9d8f}.request.broken rect{fill:#e76f51}
        .attempt circle{fill:#b3261e}.delivered{fill:none;stroke:#264653;stroke-width:1.5}
        .link-rate{fill:none;stroke:#6a4fb3;stroke-width:1.5}.link-delay{fill:none;stroke:#e76f51;stroke-dasharray:4 3}
        .link-scale{text-anchor:end;fill:#6a4fb3}
        .output path{stroke:#999}.output.stderr path{stroke:#b3261e}.deadline line{stroke:#b3261e;stroke-width:2}
        .check-mark{stroke:#f4a261;stroke-width:2;display:none}.check-mark.shown{display:inline}
        .mark.highlight rect,.mark.highlight circle{stroke:#000;stroke-width:2}.mark.highlight line,.mark.highlight path{stroke:#f4a261;stroke-width:3}
        pre{background:#f6f6f6;padding:.6em;overflow:auto;max-height:20em}.hidden{display:none}
        """

    /// Sorting and filtering the suite table; picking a check shows its moments on its timeline.
    static let script = """
        (function(){
        var filter=document.getElementById('verdict-filter');
        filter.addEventListener('change',function(){var v=filter.value;
        document.querySelectorAll('tr.row, section.scenario').forEach(function(e){
        e.classList.toggle('hidden',v!==''&&e.getAttribute('data-verdict')!==v);});});
        document.querySelectorAll('#suite th').forEach(function(th){th.addEventListener('click',function(){
        var c=+th.getAttribute('data-column'),body=document.querySelector('#suite tbody'),rows=[].slice.call(body.rows);
        var up=th.getAttribute('data-up')!=='1';th.setAttribute('data-up',up?'1':'0');
        rows.sort(function(a,b){var x=a.cells[c].textContent,y=b.cells[c].textContent,nx=parseFloat(x),ny=parseFloat(y);
        var r=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return up?r:-r;});rows.forEach(function(r){body.appendChild(r);});});});
        document.querySelectorAll('a.check-link').forEach(function(a){a.addEventListener('click',function(){
        var svg=document.getElementById('timeline-'+a.getAttribute('data-scenario'));
        var marks=(a.getAttribute('data-marks')||'').split(' ').filter(Boolean).map(parseFloat);
        var name=a.textContent.replace(/^. /,'');
        svg.querySelectorAll('.highlight').forEach(function(e){e.classList.remove('highlight');});
        svg.querySelectorAll('.check-mark').forEach(function(e){e.classList.toggle('shown',e.getAttribute('data-check')===name);});
        svg.querySelectorAll('.mark').forEach(function(e){var at=parseFloat(e.getAttribute('data-at')),
        end=parseFloat(e.getAttribute('data-ended'));marks.forEach(function(m){
        if(Math.abs(m-at)<0.0015||(!isNaN(end)&&Math.abs(m-end)<0.0015))e.classList.add('highlight');});});});});
        })();
        """
}
