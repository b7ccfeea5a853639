import Foundation
import NetcondCore
import NetcondProxy

/// `0.42 s`, `12.3 s`.
public func formatSeconds(_ span: Span) -> String {
    let seconds = span.seconds
    if seconds < 10 { return "\(trimmed(seconds, decimals: 2)) s" }
    return "\(trimmed(seconds, decimals: 1)) s"
}

/// `512 B`, `1.5 KB`, `3 MB`, `1.25 GB` (binary multiples).
public func formatBytes(_ bytes: Int64) -> String {
    let value = Double(bytes)
    if bytes < 1024 { return "\(bytes) B" }
    if bytes < 1024 * 1024 { return "\(trimmed(value / 1024, decimals: 1)) KB" }
    if bytes < 1024 * 1024 * 1024 { return "\(trimmed(value / 1024 / 1024, decimals: 1)) MB" }
    return "\(trimmed(value / 1024 / 1024 / 1024, decimals: 2)) GB"
}

/// A rate in bits per second: `0 bit/s`, `240 kbit/s`, `1.2 Mbit/s`.
public func formatRate(bitsPerSecond: Double) -> String {
    if bitsPerSecond < 1000 { return "\(Int(bitsPerSecond.rounded())) bit/s" }
    if bitsPerSecond < 1e6 { return "\(trimmed(bitsPerSecond / 1e3, decimals: 0)) kbit/s" }
    if bitsPerSecond < 1e9 { return "\(trimmed(bitsPerSecond / 1e6, decimals: 1)) Mbit/s" }
    return "\(trimmed(bitsPerSecond / 1e9, decimals: 2)) Gbit/s"
}

private func trimmed(_ value: Double, decimals: Int) -> String {
    let scale = pow(10.0, Double(decimals))
    let rounded = (value * scale).rounded() / scale
    var text = "\(rounded)"
    if text.hasSuffix(".0") { text.removeLast(2) }
    return text
}

extension ControlStatus {
    /// What the link is doing: `3g`, `subway · phase tunnel · OUTAGE blackhole`, `lte · STALLED down`.
    public var stateSummary: String {
        var parts = [self.profile]
        if self.phase != self.profile { parts.append("phase \(self.phase)") }
        if let outage = self.outage { parts.append("OUTAGE \(outage)") }
        if !self.stalled.isEmpty { parts.append("STALLED \(self.stalled.joined(separator: "+"))") }
        if let portal = self.captivePortal { parts.append("portal \(portal)") }
        return parts.joined(separator: " · ")
    }

    /// The counters that mean something went missing: `lost 4 · resets 2`, or empty.
    public var dropsSummary: String {
        let drops: [(String, Int)] = [
            ("lost", self.segmentsLost), ("queue drops", self.queueDrops), ("outage drops", self.outageDrops),
            ("resets", self.resets), ("closed early", self.closes), ("refused", self.refusedConnections),
            ("upstream failures", self.upstreamFailures),
        ]
        return drops.filter { $0.1 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: " · ")
    }

    /// One readable line: state, connections, bytes, drops, elapsed.
    public var summary: String {
        var parts = [
            self.stateSummary,
            "\(self.connectionsTotal) connection\(self.connectionsTotal == 1 ? "" : "s") (\(self.connectionsOpen) open)",
            "↓ \(formatBytes(self.bytesDown)) ↑ \(formatBytes(self.bytesUp))",
        ]
        let drops = self.dropsSummary
        if !drops.isEmpty { parts.append(drops) }
        parts.append(formatSeconds(Span(nanoseconds: Int64(self.elapsedSeconds * 1e9))))
        return parts.joined(separator: " · ")
    }

    /// The live line `netcond proxy` redraws: state, rates since `previous`, open connections, drops.
    public func liveLine(since previous: ControlStatus?) -> String {
        var parts = [self.stateSummary]
        if let previous, self.elapsedSeconds > previous.elapsedSeconds {
            let seconds = self.elapsedSeconds - previous.elapsedSeconds
            let down = Double(self.bytesDown - previous.bytesDown) * 8 / seconds
            let up = Double(self.bytesUp - previous.bytesUp) * 8 / seconds
            parts.append("↓ \(formatRate(bitsPerSecond: max(0, down))) ↑ \(formatRate(bitsPerSecond: max(0, up)))")
        }
        parts.append("\(self.connectionsOpen) open")
        let drops = self.dropsSummary
        if !drops.isEmpty { parts.append(drops) }
        return parts.joined(separator: " · ")
    }
}
