import Foundation
import NetcondCore
import NetcondProxy
import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

/// What a running `netcond proxy` (or `run`) tells the person watching, on stderr: state changes
/// as log lines (`+90.0 s  subway: tunnel, outage (blackhole)`), and on a terminal one status line
/// redrawn every second (profile, phase, rates, open connections, drops).
final class LiveStatus: @unchecked Sendable {
    private let lock = NSLock()
    /// A status line is redrawn (stderr is a terminal and the command asked for it).
    let live: Bool
    private var lineShown = false
    private var previous: ControlStatus?
    private var lastLine: String?
    private var sawInitialState = false
    /// A program's output passed through ended mid-line: no status line until it ends the line.
    private var midLine = false

    /// `live`: redraw a status line (only when stderr is a terminal).
    init(live: Bool) {
        self.live = live && isatty(2) == 1
    }

    /// A state change of the link, `at` since the start. The initial state is not news: the
    /// command's own header names the profile.
    func stateChanged(_ state: LinkState, at: Span) {
        let first = self.lock.withLock {
            defer { self.sawInitialState = true }
            return !self.sawInitialState
        }
        if first { return }
        self.log("netcond: +\(String(format: "%.1f", at.seconds)) s  link: \(state)")
    }

    /// One log line, above the status line when one is shown.
    func log(_ line: String) {
        self.lock.lock()
        defer { self.lock.unlock() }
        var text = self.lineShown ? "\r\u{1B}[K" : ""
        text += line + "\n"
        self.lineShown = false
        writeStandardError(text)
        if self.live, let line = self.lastLine { self.draw(line) }
    }

    /// Redraws the status line with `status` (rates since the previous call).
    func update(_ status: ControlStatus) {
        guard self.live else { return }
        self.lock.lock()
        defer { self.lock.unlock() }
        let line = status.liveLine(since: self.previous)
        self.previous = status
        self.lastLine = line
        self.draw(line)
    }

    /// A program's output, shown where it would have gone (`descriptor` 1 or 2) with the status
    /// line out of its way: cleared before, redrawn after once the output ends a line.
    func passThrough(_ descriptor: Int32, _ bytes: Data) {
        self.lock.lock()
        defer { self.lock.unlock() }
        if self.lineShown {
            writeStandardError("\r\u{1B}[K")
            self.lineShown = false
        }
        if descriptor == 1 { fflush(nil) }
        bytes.withUnsafeBytes { raw in
            if let base = raw.baseAddress { OutputCapture.writeAll(descriptor, base, raw.count) }
        }
        if let last = bytes.last { self.midLine = last != UInt8(ascii: "\n") }
        if self.live, !self.midLine, let line = self.lastLine { self.draw(line) }
    }

    /// Redraws the status line with a line of the caller's own.
    func show(_ line: String) {
        guard self.live else { return }
        self.lock.lock()
        defer { self.lock.unlock() }
        self.lastLine = line
        self.draw(line)
    }

    /// Clears the status line (before the summary).
    func finish() {
        self.lock.lock()
        defer { self.lock.unlock() }
        if self.lineShown { writeStandardError("\r\u{1B}[K") }
        self.lineShown = false
        self.lastLine = nil
    }

    private func draw(_ line: String) {
        guard !self.midLine else { return }
        var columns = winsize()
        let width = ioctl(2, UInt(TIOCGWINSZ), &columns) == 0 && columns.ws_col > 10 ? Int(columns.ws_col) - 1 : 119
        let shown = line.count > width ? String(line.prefix(width - 1)) + "…" : line
        writeStandardError("\r\u{1B}[K" + shown)
        self.lineShown = true
    }
}

/// The status line of a scenario run: `LABEL  +4.2 s  normal  1.2 MB down  3 requests`.
func scenarioStatusLine(_ label: String, _ progress: ScenarioProgress) -> String {
    "\(label)  +\(String(format: "%.1f", progress.elapsed)) s  \(progress.phase)  "
        + "\(formatBytes(progress.bytesDown)) down  \(progress.requests) request\(progress.requests == 1 ? "" : "s")"
}
