import Foundation
import NetcondCore

/// `netcond report --tcptrace CAPTURE.pcap [--drops DROPS.pcap] --html OUT`: a time–sequence graph
/// (tcptrace's, Wireshark's Stevens graph) of each TCP connection of a packet-engine capture, one
/// self-contained page (inline SVG, no script): data segments as vertical bars of their bytes,
/// retransmissions red, the receiver's acknowledgements as a green step line and its window's edge
/// as an olive one, the segments the link dropped as red crosses, SYN/FIN/RST marked; time and
/// bytes on labelled axes. It shows what Apple's networking guidance asks tcptrace for: how a
/// client's connection behaved under the conditions (stalls, losses and their recovery, a receiver
/// that closed its window).
public enum TimeSequenceReport {
    /// Connections drawn (the largest); the rest are listed.
    static let maxConnections = 20

    static let width = 1000.0, height = 360.0
    static let left = 80.0, right = 990.0, top = 26.0, bottom = 320.0

    public static func render(_ graph: TimeSequence, source: String, drops: String?) -> String {
        var html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        html +=
            "<title>netcond: time–sequence graphs of \(Markup.escaped(source))</title><style>\(Self.style)</style></head><body>\n"
        html += "<h1>Time–sequence graphs of \(Markup.escaped(source))</h1>\n"
        var said = "\(graph.connections.count) TCP connection\(graph.connections.count == 1 ? "" : "s")"
        if graph.otherPackets > 0 {
            said +=
                "; \(graph.otherPackets) other packet\(graph.otherPackets == 1 ? "" : "s") (not TCP over IP) left out"
        }
        said +=
            drops.map { "; the link's drops from \($0)" }
            ?? "; no capture of the link's drops given (--drops FILE: netcond run --pcap-drops)"
        html += "<p class=\"facts\">\(Markup.escaped(said))</p>\n"
        html += Self.legend
        for (index, connection) in graph.connections.prefix(Self.maxConnections).enumerated() {
            html += Self.section(connection, index: index, dropsKnown: drops != nil)
        }
        if graph.connections.count > Self.maxConnections {
            html += "<h2>Not drawn</h2><ul>"
            for connection in graph.connections.dropFirst(Self.maxConnections) {
                html +=
                    "<li>\(Markup.escaped("\(connection.sender) → \(connection.receiver): \(connection.bytes) bytes"))</li>"
            }
            html += "</ul>\n"
        }
        return html + "</body></html>\n"
    }

    /// `dropsKnown`: the link's drops were captured (else none can be counted).
    /// What the marks mean (above the graphs).
    static let legend =
        "<p class=\"legend\"><span class=\"key data\"></span>data segment <span class=\"key retx\"></span>retransmission "
        + "<span class=\"key ack\"></span>acknowledged <span class=\"key window\"></span>receive window's edge "
        + "<span class=\"key drop\">✕</span>dropped by the link <span class=\"key flag\"></span>SYN, FIN, RST</p>\n"

    static func section(_ connection: TimeSequence.Connection, index: Int, dropsKnown: Bool = true) -> String {
        var facts = ["\(Self.bytes(Double(connection.bytes))) sent in \(Self.number(connection.duration)) s"]
        facts.append("\(connection.retransmissions) retransmission\(connection.retransmissions == 1 ? "" : "s")")
        if dropsKnown {
            facts.append(
                "\(connection.dropped.count) segment\(connection.dropped.count == 1 ? "" : "s") dropped by the link")
        } else {
            facts.append("the link's drops not captured (--pcap-drops)")
        }
        if !connection.windowScaleKnown {
            facts.append("window drawn unscaled (the receiver's SYN is not in the capture)")
        }
        if connection.leftOut > 0 {
            facts.append("\(connection.leftOut) points past \(TimeSequence.maxPoints) left out")
        }
        let start = Date(timeIntervalSince1970: Double(connection.startedAt) / 1e9)
        var html =
            "<section class=\"connection\" id=\"connection-\(index)\"><h2>\(Markup.escaped("\(connection.sender) → \(connection.receiver)"))</h2>\n"
        html +=
            "<p class=\"facts\">\(Markup.escaped(facts.joined(separator: " · "))) · from \(Markup.escaped(ISO8601DateFormatter().string(from: start)))</p>\n"
        html += Self.graph(connection, index: index)
        return html + "</section>\n"
    }

    static func graph(_ connection: TimeSequence.Connection, index: Int) -> String {
        let end = max(connection.duration, 0.001) * 1.02
        let most =
            Double(
                max(
                    connection.bytes, connection.acknowledgements.compactMap(\.window).max() ?? 0,
                    connection.dropped.map(\.end).max() ?? 0, 1)) * 1.04
        func x(_ at: Double) -> String {
            String(format: "%.1f", Self.left + (Self.right - Self.left) * min(max(at, 0), end) / end)
        }
        func y(_ sequence: Int64) -> String {
            String(format: "%.1f", Self.bottom - (Self.bottom - Self.top) * min(max(Double(sequence), 0), most) / most)
        }
        var svg =
            "<svg class=\"tsg\" id=\"tsg-\(index)\" viewBox=\"0 0 \(Int(Self.width)) \(Int(Self.height))\" width=\"100%\" "
            + "role=\"img\" aria-label=\"time–sequence graph\" data-seconds=\"\(Self.number(end))\" data-bytes=\"\(Int64(most))\">\n"
        // Axes: seconds below, bytes (relative sequence) on the left.
        svg += HTMLReport.timeAxis(
            end: end, x: x, lineClass: "grid", from: Self.top, to: Self.bottom, labelY: Int(Self.bottom + 16))
        let byteStep = Self.byteStep(most)
        var level = 0.0
        for _ in 0..<100 where level <= most {
            svg +=
                "<line class=\"grid\" x1=\"\(Self.left)\" x2=\"\(Self.right)\" y1=\"\(y(Int64(level)))\" y2=\"\(y(Int64(level)))\"/>"
            svg +=
                "<text class=\"axis-y\" x=\"\(Int(Self.left - 6))\" y=\"\(Int(Double(y(Int64(level)))! + 4))\">\(Self.bytes(level))</text>"
            level += byteStep
        }
        svg +=
            "<text class=\"axis-name\" x=\"\(Int(Self.right))\" y=\"\(Int(Self.bottom + 34))\">seconds since the connection's first packet</text>"
        svg += "<text class=\"axis-name-y\" x=\"12\" y=\"\(Int(Self.top + 4))\">bytes</text>\n"
        // The window's edge and the acknowledgements, as step lines.
        func steps(_ points: [(Double, Int64)]) -> String {
            var out: [String] = []
            for (number, point) in points.enumerated() {
                if number > 0 { out.append("\(x(point.0)),\(y(points[number - 1].1))") }
                out.append("\(x(point.0)),\(y(point.1))")
            }
            return out.joined(separator: " ")
        }
        let windows = connection.acknowledgements.compactMap { ack in ack.window.map { (ack.at, $0) } }
        if !windows.isEmpty {
            svg +=
                "<polyline class=\"window\" points=\"\(steps(windows))\"><title>the receiver's window's edge</title></polyline>\n"
        }
        if !connection.acknowledgements.isEmpty {
            svg +=
                "<polyline class=\"ack\" points=\"\(steps(connection.acknowledgements.map { ($0.at, $0.ack) }))\">"
                + "<title>acknowledged</title></polyline>\n"
        }
        // Data segments: one path for the first sends, one for the retransmissions (a bar each).
        for (retransmissions, name) in [(false, "data"), (true, "retx")] {
            let bars = connection.segments.filter { $0.retransmission == retransmissions }
            guard !bars.isEmpty else { continue }
            let path = bars.map { "M\(x($0.at)) \(y($0.start))V\(y($0.end))" }.joined()
            svg +=
                "<path class=\"\(name)\" d=\"\(path)\"><title>\(bars.count) \(retransmissions ? "retransmitted" : "data") "
                + "segment\(bars.count == 1 ? "" : "s")</title></path>\n"
            if retransmissions {
                // A segment is a dot at a long run's scale: each retransmission gets a ring too.
                let rings = bars.prefix(2_000).map { "M\(x($0.at)) \(y($0.start))m-3 0a3 3 0 1 0 6 0a3 3 0 1 0 -6 0" }
                    .joined()
                svg += "<path class=\"retx-mark\" d=\"\(rings)\"/>\n"
            }
        }
        svg += Self.dropsAndFlags(connection, x: x, y: y)
        return svg + "</svg>\n"
    }

    /// The segments the link dropped (crosses) and the connection's SYN, FIN and RST flags.
    static func dropsAndFlags(
        _ connection: TimeSequence.Connection, x: (Double) -> String, y: (Int64) -> String
    ) -> String {
        var out = ""
        if !connection.dropped.isEmpty {
            let crosses = connection.dropped.map { drop -> String in
                let cx = Double(x(drop.at))!, cy = (Double(y(drop.start))! + Double(y(drop.end))!) / 2
                return String(format: "M%.1f %.1fl6 6m0 -6l-6 6", cx - 3, cy - 3)
            }.joined()
            out +=
                "<path class=\"drop\" d=\"\(crosses)\"><title>\(connection.dropped.count) segment\(connection.dropped.count == 1 ? "" : "s") "
                + "dropped by the link</title></path>\n"
        }
        for flag in connection.flags.prefix(20) {
            out +=
                "<g class=\"flag\"><title>\(flag.kind) from the \(flag.fromSender ? "sender" : "receiver") at "
                + "\(Self.number(flag.at))s</title><line x1=\"\(x(flag.at))\" x2=\"\(x(flag.at))\" y1=\"\(Self.top)\" y2=\"\(Self.bottom)\"/>"
                + "<text x=\"\(x(flag.at))\" y=\"\(Int(Self.top + 8))\">\(flag.kind)</text></g>\n"
        }
        return out
    }

    /// About six levels of round bytes up to `most`: 1, 2 or 5 times 10ⁿ bytes, KB or MB (1,024s).
    static func byteStep(_ most: Double) -> Double {
        for unit in [1.0, 1024, 1_048_576, 1_073_741_824] {
            for factor in [1.0, 2, 5, 10, 20, 50, 100, 200, 500] where most / (unit * factor) <= 6 {
                return unit * factor
            }
        }
        return (most / 6).rounded(.up)
    }

    static func bytes(_ value: Double) -> String { HTMLReport.bytesText(value) }

    static func number(_ value: Double) -> String { HTMLReport.number(value) }

    static let style = """
        body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}h2{font-size:1.05em;margin-top:1.6em}
        .facts,.legend{color:#555}.key{display:inline-block;width:1.2em;margin:0 .3em 0 .8em;vertical-align:middle}
        .key.data{border-top:3px solid #264653}.key.retx{border-top:3px solid #b3261e}.key.ack{border-top:2px solid #2a9d8f}
        .key.window{border-top:2px solid #8a8a00}.key.drop{color:#b3261e;width:auto}.key.flag{border-left:1px dashed #999;width:0;height:1em}
        svg.tsg{border:1px solid #ddd;background:#fcfcfc;max-width:1100px}text{font-size:11px;fill:#444}
        .grid{stroke:#eee}.axis{text-anchor:middle;fill:#777}.axis-y{text-anchor:end;fill:#777}.axis-name{text-anchor:end;fill:#999}
        .axis-name-y{fill:#999}.data{stroke:#264653;stroke-width:1.5}.retx{stroke:#b3261e;stroke-width:2}
        .ack{fill:none;stroke:#2a9d8f;stroke-width:1.2}.window{fill:none;stroke:#8a8a00;stroke-width:1}
        .drop{stroke:#b3261e;stroke-width:1.5;fill:none}.retx-mark{fill:none;stroke:#b3261e;stroke-width:1}.flag line{stroke:#999;stroke-dasharray:3 3}.flag text{fill:#777;font-size:10px}
        """
}
