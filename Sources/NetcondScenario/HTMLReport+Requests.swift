import Foundation
import NetcondCore

/// The timeline's requests lane (every request as a bar from its arrival to the end of its
/// response, the captive portal's answers among them) and its attempts lane (attempts that reached
/// no server, the gaps between attempts, the waits the server asked for).
extension HTMLReport {
    /// Requests' rows: one labelled row each, or packed (a row takes a request once its last one ended).
    struct RequestRows {
        var labelled: Bool
        /// The origin's requests asked for more than one host: each label names its own.
        var showsHosts: Bool
        var rowOf: [Int] = []
        var count: Int { max(1, (self.rowOf.max() ?? 0) + 1) }
        var height: Double { self.labelled ? 14 : 8 }

        init(_ requests: [DrawnRequest], end: Double) {
            self.labelled = requests.count <= HTMLReport.labelledRequests
            let hosts = Set(requests.compactMap { if case .origin(let request) = $0 { request.host } else { nil } })
            self.showsHosts = hosts.count > 1
            if self.labelled {
                self.rowOf = Array(requests.indices)
                return
            }
            var rowEnds: [Double] = []
            for request in requests {
                let at = HTMLReport.finite(request.at) ?? 0
                let ended = max(HTMLReport.finite(request.finished) ?? end, at) + end / 200
                let free = rowEnds.firstIndex { $0 <= at }
                let earliest = rowEnds.indices.min { rowEnds[$0] < rowEnds[$1] }
                if let row = free ?? (rowEnds.count < HTMLReport.maxRequestRows ? nil : earliest) {
                    rowEnds[row] = ended
                    self.rowOf.append(row)
                } else {
                    rowEnds.append(ended)
                    self.rowOf.append(rowEnds.count - 1)
                }
            }
        }
    }

    /// A request the captive portal answered in the origin's place: its login page, where the
    /// client expected data.
    struct PortalAnswer: Equatable {
        var at: Double
        var method: String
        var path: String
        var url: String
        var status: Int
    }

    /// A row of the requests lane: a request the origin saw, or one the portal answered.
    enum DrawnRequest: Equatable {
        case origin(ReportScenario.Request)
        case portal(PortalAnswer)

        var at: Double {
            switch self {
            case .origin(let request): return request.at
            case .portal(let answer): return answer.at
            }
        }

        /// When its response ended at the client (else at the origin), when known.
        var finished: Double? {
            if case .origin(let request) = self { return request.received ?? request.ended }
            return nil
        }
    }

    /// The requests the origin saw, and those the captive portal answered in its place, in the
    /// order they came.
    static func drawnRequests(_ scenario: ReportScenario) -> [DrawnRequest] {
        let origin = (scenario.requests ?? []).map(DrawnRequest.origin)
        let portal = Self.portalAnswers(scenario.events ?? []).map(DrawnRequest.portal)
        return (origin + portal).sorted { (Self.finite($0.at) ?? 0) < (Self.finite($1.at) ?? 0) }
    }

    /// The requests the captive portal answered (events `portal answered 200: GET http://host/path`).
    static func portalAnswers(_ events: [ReportScenario.Event]) -> [PortalAnswer] {
        events.compactMap { event -> PortalAnswer? in
            guard event.kind == .captive, event.detail.hasPrefix("portal answered "), let at = Self.finite(event.at)
            else { return nil }
            let rest = event.detail.dropFirst("portal answered ".count)
            guard let colon = rest.firstIndex(of: ":"), let status = Int(rest[..<colon]) else { return nil }
            let words = rest[rest.index(after: colon)...].split(separator: " ", maxSplits: 1).map(String.init)
            guard words.count == 2 else { return nil }
            let url = words[1]
            var path = url
            if let scheme = url.range(of: "://"), let slash = url[scheme.upperBound...].firstIndex(of: "/") {
                path = String(url[slash...])
            }
            return PortalAnswer(at: at, method: words[0], path: path, url: url, status: status)
        }
    }

    /// One request: its label in the left column when rows are labelled (with its host when
    /// `hosts`); its bar.
    static func requestRow(
        _ request: DrawnRequest, top: Double, height: Double, labelled: Bool, hosts: Bool, end: Double,
        position: (Double) -> Double
    ) -> (bar: String, label: String) {
        switch request {
        case .portal(let answer):
            return Self.portalRow(answer, top: top, height: height, labelled: labelled, position: position)
        case .origin(let request):
            return Self.originRow(
                request, top: top, height: height, labelled: (labelled, hosts), end: end, position: position)
        }
    }

    /// The portal's answer: its login page, where the client asked for data.
    static func portalRow(
        _ answer: PortalAnswer, top: Double, height: Double, labelled: Bool, position: (Double) -> Double
    ) -> (bar: String, label: String) {
        let at = answer.at
        let title =
            "+\(Self.number(at))s \(answer.method) \(answer.url) → \(answer.status) from the captive portal: "
            + "its login page, not what was asked for"
        var label = ""
        if labelled {
            let text = "\(answer.method) \(answer.path) \(answer.status) · login page"
            label =
                "<text class=\"request-label portal\" x=\"4\" y=\"\(Int(top + height - 1))\">"
                + "\(Self.escape(text.count > 40 ? String(text.prefix(39)) + "…" : text))</text>\n"
        }
        let bar =
            "<g class=\"mark request portal\" data-at=\"\(Self.number(at))\"><title>\(Self.escape(title))</title>"
            + "<rect x=\"\(String(format: "%.1f", position(at)))\" y=\"\(Int(top))\" height=\"\(Int(height))\" "
            + "width=\"6\" data-w=\"6\"/></g>\n"
        return (bar, label)
    }

    /// A request the origin saw: its label (host when `labelled.hosts`, method, path, status,
    /// `Range`, bytes); its bar from arrival to the end of its response, the part before the
    /// response head (waiting on the server) lighter, coloured by outcome.
    static func originRow(
        _ request: ReportScenario.Request, top: Double, height: Double, labelled: (rows: Bool, hosts: Bool),
        end: Double,
        position: (Double) -> Double
    ) -> (bar: String, label: String) {
        let at = Self.finite(request.at) ?? 0
        // The bar ends when the response's last byte reached the client (what the link held
        // included); for one still on its way when the run ended, at the run's end; else when the
        // origin finished it.
        let ended =
            Self.finite(request.received)
            ?? (request.stoppedByRunEnd == true ? end / 1.02 : nil) ?? Self.finite(request.ended)
        let responded = Self.finite(request.responded)
        let broken =
            (request.status ?? 599) >= 400 || request.cutShort == true
            || request.bodyBytesReceived != nil || request.linkCut != nil
        let classes = "mark request" + (request.range != nil ? " range" : "") + (broken ? " broken" : "")
        let start = position(at)
        let stop = max(position(ended ?? end), start + 2)
        let title = Self.requestTitle(request, ended: ended)
        let exact = String(format: "%.3f", max(0, position(ended ?? end) - start))
        var svg =
            "<g class=\"\(classes)\" data-at=\"\(Self.number(at))\""
            + (ended.map { " data-ended=\"\(Self.number($0))\"" } ?? "")
            + "><title>\(Self.escape(title))</title><rect x=\"\(String(format: "%.1f", start))\" y=\"\(Int(top))\" "
            + "height=\"\(Int(height))\" width=\"" + String(format: "%.1f", stop - start) + "\" data-w=\"\(exact)\"/>"
        if let responded, responded > at {
            let waitEnd = min(max(position(responded), start), stop)
            if waitEnd - start >= 1 {
                svg +=
                    "<rect class=\"wait\" x=\"\(String(format: "%.1f", start))\" y=\"\(Int(top))\" "
                    + "height=\"\(Int(height))\" width=\"\(String(format: "%.1f", waitEnd - start))\" "
                    + "data-w=\"\(String(format: "%.3f", waitEnd - start))\"/>"
            }
        }
        var text = ""
        if labelled.rows {
            text =
                "<text class=\"request-label\(broken ? " broken" : "")\" x=\"4\" y=\"\(Int(top + height - 1))\">"
                + "\(Self.escape(Self.requestLabel(request, host: labelled.hosts)))</text>\n"
        }
        return (svg + "</g>\n", text)
    }

    /// A request's title: all the row says, and when each part of it happened.
    static func requestTitle(_ request: ReportScenario.Request, ended: Double?) -> String {
        let at = Self.finite(request.at) ?? 0
        let status = request.status.map(String.init) ?? "no answer"
        var title = "+\(Self.number(at))s \(request.method) \(request.host ?? "")\(request.path) → \(status)"
        if let range = request.range { title += ", Range: \(range)" }
        if let key = request.idempotencyKey { title += ", Idempotency-Key: \(key)" }
        if let condition = request.condition { title += ", \(condition)" }
        title += ", \(request.bodyBytes) bytes"
        if let received = request.bodyBytesReceived { title += " (\(received) reached the client)" }
        if let cut = request.linkCut { title += ", the link \(cut == .reset ? "reset" : "closed") it" }
        if request.stoppedByRunEnd == true {
            title += ", the rest still on its way when the run ended"
        } else if request.cutShort == true {
            title += ", cut short"
        }
        if let responded = Self.finite(request.responded), responded > at {
            title += ", waited \(Self.number(((responded - at) * 1000).rounded() / 1000))s for the server"
        }
        if let received = Self.finite(request.received) {
            title +=
                ", sent by +\(Self.number(Self.finite(request.ended) ?? received))s, "
                + "its last byte at the client +\(Self.number(received))s"
        } else if let ended {
            title += ", ended +\(Self.number(ended))s"
        }
        return title
    }

    /// `GET /files/big.bin 206 614400- · 600 KB · cut` (with `host`, `cdn.netcond.test GET …`), at
    /// most 40 characters.
    static func requestLabel(_ request: ReportScenario.Request, host: Bool = false) -> String {
        var label = host ? (request.host.map { $0 + " " } ?? "") : ""
        label += "\(request.method) \(request.path) " + (request.status.map(String.init) ?? "no answer")
        if let range = request.range { label += " " + range.replacingOccurrences(of: "bytes=", with: "") }
        label += " · " + Self.bytesText(Double(request.bodyBytesReceived ?? request.bodyBytes))
        if request.stoppedByRunEnd == true {
            label += " · unfinished"
        } else if request.cutShort == true || request.linkCut != nil {
            label += " · cut"
        }
        return label.count > 40 ? String(label.prefix(39)) + "…" : label
    }

    /// Attempts that reached no server (●); between consecutive attempts of any kind (those that
    /// reached the origin too) the gap, labelled with its length while there are few; and after a
    /// response that asked for a wait (`Retry-After` in seconds) that wait, as a bar the next
    /// attempt should not come before: a client's backoff, or its lack, at a glance.
    static func attemptLane(
        _ attempts: [ReportScenario.Attempt], requests: [ReportScenario.Request], top: Double,
        position: (Double) -> Double
    ) -> String {
        var svg = ""
        for attempt in attempts {
            let at = Self.finite(attempt.at) ?? 0
            let title = "+\(Self.number(at))s \(attempt.outcome.rawValue) \(attempt.host):\(attempt.port)"
            svg +=
                "<g class=\"mark attempt\" data-at=\"\(Self.number(at))\"><title>\(Self.escape(title))</title>"
                + "<circle cx=\"\(String(format: "%.1f", position(at)))\" cy=\"\(Int(top + 10))\" r=\"4\"/></g>\n"
        }
        let waits = Self.retryAfterWaits(requests, top: top, position: position)
        svg += waits.svg
        let times = (attempts.compactMap { Self.finite($0.at) } + requests.compactMap { Self.finite($0.at) }).sorted()
        guard times.count >= 2, times.count - 1 <= Self.maxGapLabels else { return svg }
        for (a, b) in zip(times, times.dropFirst()) where position(b) - position(a) >= 4 {
            svg += Self.gap(from: a, to: b, asked: waits.asked[a], top: top, position: position)
        }
        return svg
    }

    /// Waits the server asked for (`Retry-After` in seconds), each a bar from the response on,
    /// by the moment of the attempt whose response asked.
    static func retryAfterWaits(
        _ requests: [ReportScenario.Request], top: Double, position: (Double) -> Double
    ) -> (svg: String, asked: [Double: (from: Double, wait: Double)]) {
        var svg = ""
        var asked: [Double: (from: Double, wait: Double)] = [:]
        for (number, request) in requests.prefix(Self.maxGapLabels).enumerated() {
            guard let text = request.retryAfter, let wait = Double(text.trimmingCharacters(in: .whitespaces)), wait > 0,
                let at = Self.finite(request.at)
            else { continue }
            let from = Self.finite(request.ended) ?? at
            asked[at] = (from, wait)
            let row = top + 28 + Double(number % 2) * 5
            let width = String(format: "%.1f", max(1, position(from + wait) - position(from)))
            let until = String(format: "%.1f", position(from + wait) - 1)
            svg +=
                "<g class=\"retry-after\"><title>the response at +\(Self.number(from))s asked the client to wait "
                + "\(Self.number(wait))s (Retry-After): until +\(Self.number(from + wait))s</title>"
                + "<rect x=\"\(String(format: "%.1f", position(from)))\" y=\"\(Int(row))\" height=\"3\" "
                + "width=\"\(width)\"/>"
                + "<rect class=\"until\" x=\"\(until)\" y=\"\(Int(row - 3))\" height=\"9\" width=\"2\"/></g>\n"
        }
        return (svg, asked)
    }

    /// The gap between two attempts, labelled with its length where it fits (red when the client
    /// came sooner than the server asked).
    static func gap(
        from a: Double, to b: Double, asked: (from: Double, wait: Double)?, top: Double, position: (Double) -> Double
    ) -> String {
        let gap = ((b - a) * 100).rounded() / 100
        var label = "\(Self.number(gap))s"
        var early = false
        if let asked {
            label += ", asked \(Self.number(asked.wait))s"
            early = b < asked.from + asked.wait
        }
        func x(_ value: Double) -> String { String(format: "%.1f", value) }
        let sooner = early ? ": sooner than the server asked" : ""
        var svg =
            "<g class=\"gap\(early ? " early" : "")\"><title>\(label) between attempts\(sooner)</title>"
            + "<line x1=\"\(x(position(a) + 4))\" x2=\"\(x(position(b) - 4))\" "
            + "data-o-x1=\"\(x(position(a)))\" data-dx1=\"4\" data-o-x2=\"\(x(position(b)))\" data-dx2=\"-4\" "
            + "y1=\"\(Int(top + 10))\" y2=\"\(Int(top + 10))\"/>"
        if position(b) - position(a) >= Double(label.count) * 5.5 + 6 {
            svg +=
                "<text x=\"\(String(format: "%.1f", (position(a) + position(b)) / 2))\" y=\"\(Int(top + 24))\">"
                + "\(label)</text>"
        }
        return svg + "</g>\n"
    }
}
