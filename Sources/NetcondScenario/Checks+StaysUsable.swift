import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// `stays-usable`: each step finishes within its budget, and without a network the client ends
/// or reports within a bound.
extension Checks {

    static func staysUsable(_ check: StaysUsableCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "stays-usable"
        var seen: [String] = []
        var problems: [String] = []
        if let steps = check.steps {
            let budget = check.budget.seconds
            // Each step: how long it took, when it began, when it ended, what it was.
            var durations: [(seconds: Double, at: Double, end: Double, what: String)] = []
            let described: String
            switch steps {
            case .lines(let pattern):
                described = "lines matching '\(pattern)'"
                let regex = try? NSRegularExpression(pattern: pattern)
                var previous = 0.0
                for line in evidence.lines {
                    let range = NSRange(line.text.startIndex..., in: line.text)
                    guard regex?.firstMatch(in: line.text, range: range) != nil else { continue }
                    durations.append((line.at - previous, line.at, line.at, "'\(Self.clip(line.text))'"))
                    previous = line.at
                }
            case .requests(let glob):
                described = "requests for \(glob)"
                for request in evidence.requests where fnmatch(glob, request.path, 0) == 0 {
                    guard let ended = request.ended else {
                        durations.append((.infinity, request.at, .infinity, "\(request.method) \(request.path) never answered"))
                        continue
                    }
                    let broken = request.cutShort || (request.status ?? 599) >= 400
                    durations.append((ended - request.at, request.at, ended,
                                      "\(request.method) \(request.path)" + (broken ? " (\(Self.failureCause(request)))" : "")))
                    if broken { problems.append("\(request.method) \(request.path) at +\(Self.seconds(request.at)) failed (\(Self.failureCause(request)))") }
                }
            }
            if let slowest = durations.max(by: { $0.seconds < $1.seconds }) {
                let slowText = slowest.seconds.isFinite ? Self.seconds(slowest.seconds) : "forever"
                seen.append("\(durations.count) step\(durations.count == 1 ? "" : "s") (\(described)), slowest \(slowText): \(slowest.what) at +\(Self.seconds(slowest.at))")
                let over = durations.filter { $0.seconds > budget }
                if !over.isEmpty {
                    problems.append("\(over.count) step\(over.count == 1 ? "" : "s") over the \(formatSeconds(check.budget)) budget")
                }
            } else {
                seen.append("no \(described)")
            }
            if let within = check.within, let last = durations.map(\.end).max() {
                if last > within.seconds {
                    problems.append("the last step ended at +\(last.isFinite ? Self.seconds(last) : "never") (need all within \(formatSeconds(within)))")
                } else {
                    seen.append("all done by +\(Self.seconds(last))")
                }
            }
            if durations.count < check.minSteps {
                problems.append("\(durations.count) of the \(check.minSteps) step\(check.minSteps == 1 ? "" : "s") needed")
            }
            // A client stopped at its deadline was not usable for the rest of the run, however fast its steps.
            if evidence.timedOut && check.givesUpWithin == nil {
                problems.append("still running at its \(formatSeconds(evidence.deadline)) deadline")
            }
        }
        if let within = check.givesUpWithin {
            let bound = formatSeconds(within)
            if evidence.timedOut {
                problems.append("still running at its \(formatSeconds(evidence.deadline)) deadline (need it to end by itself within \(bound))")
            } else if let exit = evidence.exit {
                let said = Self.lastLine(evidence.stderrTail)
                var ended = "ended by itself after \(Self.seconds(evidence.duration)) (\(Self.describe(exit)))"
                if let said { ended += ", saying '\(Self.clip(said))'" }
                seen.append(ended)
                if evidence.duration > within.seconds {
                    problems.append("that is later than \(bound)")
                }
                if case .signaled(let signal) = exit {
                    problems.append("killed by signal \(signal) (a crash, not a report)")
                } else if exit != .exited(0) && said == nil {
                    problems.append("it failed with nothing on stderr (need a message saying why)")
                }
            } else {
                problems.append("the client did not run")
            }
        }
        let text = seen.joined(separator: "; ")
        if problems.isEmpty { return CheckResult(name: name, passed: true, evidence: text) }
        return CheckResult(name: name, passed: false, evidence: (text.isEmpty ? "" : text + " — ") + problems.joined(separator: "; "))
    }

    /// The last non-empty line of `text`, or nil.
}
