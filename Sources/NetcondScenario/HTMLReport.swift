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

    /// The page for a JSON report (`data`, read from `source`, named in errors). `connections`:
    /// the time–sequence graphs of a packet-engine run's capture (`netcond run --engine packet
    /// --pcap FILE --html OUT`), drawn after the scenario as `netcond report --tcptrace` draws them.
    public static func render(
        json data: Data, source: String, connections: (graph: TimeSequence, capture: String, dropsKnown: Bool)? = nil
    ) throws(Failure) -> String {
        let report: Report
        do {
            report = try Report.read(data)
        } catch {
            throw Failure(description: Self.readFailure(error, source: source))
        }
        var page = Self.page(report)
        if let connections, let end = page.range(of: "<script>", options: .backwards) {
            page.insert(
                contentsOf: Self.connectionsSection(
                    connections.graph, capture: connections.capture, dropsKnown: connections.dropsKnown),
                at: end.lowerBound)
        }
        return page
    }

    typealias Report = ScenarioSuite.JSONReport
    typealias ReportScenario = ScenarioSuite.JSONReport.Scenario

    /// Why a file is not drawn, naming it.
    static func readFailure(_ failure: Report.ReadFailure, source: String) -> String {
        switch failure {
        case .notJSON:
            return "\(source): not JSON (it may be truncated); \(Self.writtenBy)"
        case .notAReport:
            return "\(source): not a netcond JSON report (no \"scenarios\" list)"
        case .format(let format):
            let found = format.map { "format \($0)" } ?? "no format (an older netcond)"
            return "\(source): a report of \(found); this netcond draws format \(Report.currentFormat): "
                + "run the scenarios again with this netcond"
        case .damaged(let what):
            return "\(source): not a report this netcond wrote (\(what)); \(Self.writtenBy)"
        }
    }

    private static let writtenBy = "a report is written by netcond test --json or netcond run --json"

    /// Each TCP connection of the run, as the packets crossed the link: the picture Apple's
    /// networking guidance asks tcptrace for.
    static func connectionsSection(_ graph: TimeSequence, capture: String, dropsKnown: Bool) -> String {
        var html = "<section class=\"connections\" id=\"connections\"><h2>The run's TCP connections</h2>\n"
        html +=
            "<p class=\"facts\">\(Self.escape("Time–sequence graphs of \(capture): \(graph.connections.count) connection\(graph.connections.count == 1 ? "" : "s")"))</p>\n"
        html += TimeSequenceReport.legend
        // In the order they opened, as the timeline above has them.
        let opened = graph.connections.prefix(TimeSequenceReport.maxConnections).sorted { $0.startedAt < $1.startedAt }
        for (index, connection) in opened.enumerated() {
            html += TimeSequenceReport.section(connection, index: index, dropsKnown: dropsKnown)
        }
        if graph.connections.count > TimeSequenceReport.maxConnections {
            html +=
                "<p>\(graph.connections.count - TimeSequenceReport.maxConnections) more not drawn "
                + "(netcond report --tcptrace \(Self.escape(capture)) lists them).</p>\n"
        }
        return html
            + "<style>\(Self.scoped(TimeSequenceReport.style, within: "section.connections"))</style></section>\n"
    }

    /// `css` with every rule's selectors put under `scope` (the page-wide ones, `body` and `h1`,
    /// left out), so that a page's own classes (`.axis`, `.grid`) keep their looks.
    static func scoped(_ css: String, within scope: String) -> String {
        css.split(separator: "}").compactMap { rule -> String? in
            let parts = rule.split(separator: "{", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            let selectors = parts[0].split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                .filter { $0 != "body" && $0 != "h1" }
            guard !selectors.isEmpty else { return nil }
            return selectors.map { "\(scope) \($0)" }.joined(separator: ",") + "{" + parts[1] + "}"
        }.joined()
    }

    // MARK: - The page

    static func page(_ report: Report) -> String {
        let scenarios = report.scenarios
        let passed = scenarios.filter { $0.verdict == .passed }.count
        let failed = scenarios.filter { $0.verdict == .failed }.count
        let errors = scenarios.count - passed - failed
        var html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        html +=
            "<title>netcond: \(passed) of \(scenarios.count) scenarios passed</title><style>\(Self.style)</style></head><body>\n"
        html +=
            "<h1>netcond: \(scenarios.count) scenario\(scenarios.count == 1 ? "" : "s"), <span class=\"passed\">\(passed) passed</span>"
        if failed > 0 { html += ", <span class=\"failed\">\(failed) failed</span>" }
        if errors > 0 { html += ", <span class=\"error\">\(errors) could not run</span>" }
        html += "</h1>\n"
        if let shard = report.shard { html += "<p>Part \(Self.escape(shard)) of a sharded run.</p>\n" }
        html += Self.suiteTable(scenarios)
        for (index, scenario) in scenarios.enumerated() {
            html += Self.section(scenario, index: index)
        }
        html += "<script>\(Self.script)</script>\n</body></html>\n"
        return html
    }

    /// The suite at a glance: a row per scenario, sortable, filterable by verdict.
    static func suiteTable(_ scenarios: [ReportScenario]) -> String {
        var html = "<p><label>Show <select id=\"verdict-filter\"><option value=\"\">every verdict</option>"
        html +=
            "<option value=\"failed\">failed</option><option value=\"passed\">passed</option><option value=\"error\">could not run</option>"
        html += "</select></label></p>\n<table id=\"suite\"><thead><tr>"
        for (index, column) in ["scenario", "verdict", "duration (s)", "seed", "first failed check"].enumerated() {
            html += "<th data-column=\"\(index)\" title=\"sort\">\(column)</th>"
        }
        html += "</tr></thead><tbody>\n"
        for (index, scenario) in scenarios.enumerated() {
            let verdict = scenario.verdict.rawValue
            let firstFailed = (scenario.checks ?? []).first { !$0.passed }
            let why = firstFailed.map { "\($0.name): \($0.evidence)" } ?? (scenario.error ?? "")
            html += "<tr class=\"row\" data-verdict=\"\(Self.escape(verdict))\">"
            html += "<td><a href=\"#scenario-\(index)\">\(Self.escape(scenario.name))</a></td>"
            html += "<td class=\"\(Self.escape(verdict))\">\(Self.escape(verdict))</td>"
            html += "<td>\(Self.number(scenario.seconds))</td><td>\(scenario.seed.map(String.init) ?? "")</td>"
            html += "<td>\(Self.escape(why))</td></tr>\n"
        }
        return html + "</tbody></table>\n"
    }

    static func section(_ scenario: ReportScenario, index: Int) -> String {
        let verdict = scenario.verdict
        var html = "<section class=\"scenario\" id=\"scenario-\(index)\" data-verdict=\"\(verdict.rawValue)\">\n"
        let sign = verdict == .passed ? "✓" : verdict == .failed ? "✗" : "!"
        html += "<h2><span class=\"\(verdict.rawValue)\">\(sign)</span> \(Self.escape(scenario.name))</h2>\n"
        var facts = ["profile \(scenario.profile ?? "?")"]
        if let engine = scenario.engine { facts.append("\(engine.rawValue) engine") }
        if let sender = scenario.sender { facts.append(sender) }
        if let exit = scenario.exit { facts.append(exit) }
        if let seconds = scenario.seconds { facts.append("\(Self.number(seconds)) s") }
        if scenario.timedOut == true { facts.append("stopped at its deadline") }
        html += "<p class=\"facts\">\(Self.escape(facts.joined(separator: " · ")))</p>\n"
        if let error = scenario.error {
            html += "<p class=\"error\">\(Self.escape(error))</p>\n</section>\n"
            return html
        }
        html += Self.timeline(scenario, index: index)
        html += "<ul class=\"checks\">\n"
        for check in scenario.checks ?? [] {
            let marks = check.marks.map { Self.number($0) }.joined(separator: " ")
            let look = check.passed ? "passed" : "failed", sign = check.passed ? "✓" : "✗"
            html +=
                "<li class=\"check \(look)\"><a href=\"#timeline-\(index)\" class=\"check-link\" "
                + "data-scenario=\"\(index)\" data-marks=\"\(marks)\">\(sign) \(Self.escape(check.name))</a> — "
                + Self.escape(check.evidence)
            if let caveat = check.caveat { html += " <span class=\"caveat\">⚠ \(Self.escape(caveat))</span>" }
            html += "</li>\n"
        }
        html += "</ul>\n"
        if let output = scenario.clientOutput, !output.isEmpty {
            html +=
                "<details><summary>The end of the client's output</summary><pre>\(Self.escape(output))</pre></details>\n"
        }
        html +=
            "<p class=\"repeat\">Repeat: <code>\(Self.escape(Self.repeatCommand(scenario)))</code></p>\n</section>\n"
        return html
    }

    static func repeatCommand(_ scenario: ReportScenario) -> String {
        var words = ["netcond", "run", scenario.file ?? "?"]
        if scenario.engine == .packet { words += ["--engine", "packet"] }
        if let seed = scenario.seed { words += ["--seed", String(seed)] }
        if let command = scenario.command, command != ["(in-process client)"] {
            words += ["--"] + command
        }
        return ScenarioReport.shellLine(words)
    }

    // MARK: - The timeline (HTMLReport+Timeline.swift)

    /// The down link's rate (a solid step line, its top the run's highest rate) and one-way delay
    /// (dashed, its top the highest delay) from the report's `link` samples, with their scales.
    static func linkLane(
        _ samples: [ReportScenario.LinkRow], top: Double, end: Double, x: (Double) -> String
    ) -> String {
        let rows = samples.filter { $0.at.isFinite && $0.delay.isFinite }
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
        let rates = rows.compactMap { $0.rate.flatMap { $0.isFinite ? $0 : nil } }
        if let most = rates.max(), most > 0, rates.count == rows.count {
            let points = steps(rates.map { $0 / most })
            let peak = Bandwidth(bitsPerSecond: Int64(most))
            svg +=
                "<polyline class=\"link-rate\" points=\"\(points)\"><title>the down link's rate, up to \(peak)/s</title></polyline>\n"
            scale.append("rate ▔ \(peak)/s")
        } else {
            scale.append("rate unlimited")
        }
        if let most = rows.map(\.delay).max(), most > 0 {
            let points = steps(rows.map { $0.delay / most })
            svg +=
                "<polyline class=\"link-delay\" points=\"\(points)\"><title>the down link's one-way delay, up to "
                + "\(Self.number(most)) ms</title></polyline>\n"
            scale.append("delay ┄ \(Self.number(most)) ms")
        }
        svg +=
            "<text class=\"link-scale pinned\" x=\"\(x(end))\" y=\"\(Int(top + 9))\">\(Self.escape(scale.joined(separator: " · ")))</text>\n"
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

    /// A number as a report shows it: whole numbers without a point, others to the millisecond;
    /// nothing for none (or NaN, or an infinity: not times).
    static func number(_ value: Double?) -> String {
        guard let number = value, number.isFinite else { return "" }
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
        .request rect{fill:#5b8def}.request.range rect{fill:#2a9d8f}.request.broken rect{fill:#e76f51}.request.portal rect{fill:#8e44ad}
        .attempt circle{fill:#b3261e}.delivered{fill:none;stroke:#264653;stroke-width:1.5}
        .link-rate{fill:none;stroke:#6a4fb3;stroke-width:1.5}.link-delay{fill:none;stroke:#e76f51;stroke-dasharray:4 3}
        .link-scale{text-anchor:end;fill:#6a4fb3}svg.timeline{cursor:crosshair;user-select:none}.brush{fill:#6a4fb3;opacity:.15}
        .link-state rect.span{fill:#e4def5}.link-state rect.span.outage{fill:#f3b5ae}.link-state rect.span.stall{fill:#f6d7a7}.span-label{font-size:10px;fill:#333}
        .request rect.wait{fill:#fff;opacity:.6}.request-label{font-size:10px;fill:#333}.request-label.broken{fill:#b3261e}.request-label.portal{fill:#8e44ad}
        .retry-after rect{fill:#e9c46a}.retry-after rect.until{fill:#8a5300}.axis-name{font-weight:400;fill:#999}
        .gap line{stroke:#777;stroke-dasharray:2 2}.gap text{font-size:10px;fill:#555;text-anchor:middle}
        .gap.early line{stroke:#b3261e}.gap.early text{fill:#b3261e;font-weight:600}
        .scale{stroke:#bbb}.scale-label{text-anchor:end;font-size:10px;fill:#666}
        .deadline-label{text-anchor:end;fill:#b3261e;font-size:10px}
        .legend{font-size:12px;color:#555;max-width:1100px}.key{display:inline-block;width:1.4em;height:.7em;margin:0 .3em 0 .8em;vertical-align:middle}
        .request-ok{background:#5b8def}.request-wait{background:#bdd1f9}.request-range{background:#2a9d8f}.request-broken{background:#e76f51}.request-portal{background:#8e44ad}
        .attempt-key{background:#b3261e;border-radius:50%;width:.7em}.span-key{background:#e4def5}.span-outage{background:#f3b5ae}
        .span-stall{background:#f6d7a7}.event-key{border-left:2px dashed #6a4fb3;width:0}.deadline-key{border-left:2px solid #b3261e;width:0}
        .delivered-key{border-top:2px solid #264653;height:0}.retry-key{background:#e9c46a;height:.3em}
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
        // Zoom: drag across a timeline to see that stretch; double-click to see the whole run again.
        function tickStep(span){var s=[0.001,0.002,0.005,0.01,0.02,0.05,0.1,0.2,0.5,1,2,5,10,15,30,60,120,300,600,1800,3600];
        for(var i=0;i<s.length;i++)if(span/s[i]<=10)return s[i];return Math.ceil(span/10);}
        function seconds(v){var r=Math.round(v*1000)/1000;return String(r);}
        document.querySelectorAll('svg.timeline').forEach(function(svg){
        var L=+svg.getAttribute('data-left'),R=+svg.getAttribute('data-right'),end=+svg.getAttribute('data-end');
        var top=+svg.getAttribute('data-top'),axisY=+svg.getAttribute('data-axis');
        var g=svg.querySelector('g.zoomable'),ticks=svg.querySelector('g.axis-ticks'),brush=svg.querySelector('rect.brush');
        var view=[0,end],start=null,NS=svg.namespaceURI;
        function original(e,n){var o=e.getAttribute('data-o-'+n);if(o===null){o=e.getAttribute(n);e.setAttribute('data-o-'+n,o);}return o;}
        function apply(a,b){view=[a,b];var k=end/(b-a);
        function map(x){return (L+((x-L)/(R-L)*end-a)/(b-a)*(R-L)).toFixed(1);}
        g.querySelectorAll('*').forEach(function(e){if(e.closest('.pinned'))return;
        ['x','x1','x2','cx'].forEach(function(n){if(e.hasAttribute(n))e.setAttribute(n,(+map(+original(e,n))+(+(e.getAttribute('data-d'+n)||0))).toFixed(1));});
        if(e.tagName==='rect'&&e.hasAttribute('width')){var w=+original(e,'width'),exact=e.getAttribute('data-w');
        if(exact!==null)e.setAttribute('width',Math.max(exact>0?2:0,+exact*k).toFixed(1));else if(w>4)e.setAttribute('width',(w*k).toFixed(1));}
        if(e.tagName==='polyline')e.setAttribute('points',original(e,'points').split(' ').map(function(p){var q=p.split(',');return map(+q[0])+','+q[1];}).join(' '));
        if(e.tagName==='path')e.setAttribute('d',original(e,'d').replace(/M([0-9.]+)/g,function(_,x){return 'M'+map(+x);}));});
        while(ticks.firstChild)ticks.removeChild(ticks.firstChild);
        var step=tickStep(b-a);for(var t=Math.ceil(a/step)*step,i=0;t<=b+1e-9&&i<100;t+=step,i++){
        var x=(L+(t-a)/(b-a)*(R-L)).toFixed(1),l=document.createElementNS(NS,'line'),tx=document.createElementNS(NS,'text');
        l.setAttribute('class','tick');l.setAttribute('x1',x);l.setAttribute('x2',x);l.setAttribute('y1',top);l.setAttribute('y2',axisY);
        tx.setAttribute('class','axis');tx.setAttribute('x',x);tx.setAttribute('y',axisY+14);tx.textContent=seconds(t)+'s';
        ticks.appendChild(l);ticks.appendChild(tx);}
        svg.setAttribute('data-zoom',seconds(a)+' '+seconds(b));}
        function point(ev){var p=svg.createSVGPoint();p.x=ev.clientX;p.y=ev.clientY;return p.matrixTransform(svg.getScreenCTM().inverse());}
        function time(x){return view[0]+(Math.min(Math.max(x,L),R)-L)/(R-L)*(view[1]-view[0]);}
        svg.addEventListener('mousedown',function(ev){var p=point(ev);if(p.x<L||p.x>R)return;start=p.x;
        brush.setAttribute('x',p.x);brush.setAttribute('width',0);ev.preventDefault();});
        window.addEventListener('mousemove',function(ev){if(start===null)return;var x=Math.min(Math.max(point(ev).x,L),R);
        brush.setAttribute('x',Math.min(start,x));brush.setAttribute('width',Math.abs(x-start));});
        window.addEventListener('mouseup',function(ev){if(start===null)return;var x=point(ev).x,a=time(Math.min(start,x)),b=time(Math.max(start,x));
        start=null;brush.setAttribute('width',0);if(b-a>(view[1]-view[0])/200)apply(a,b);});
        svg.addEventListener('dblclick',function(){apply(0,end);svg.removeAttribute('data-zoom');});});
        })();
        """
}
