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
            let judged = Self.stepsJudged(steps, check, evidence)
            seen += judged.seen
            problems += judged.problems
        }
        if let within = check.givesUpWithin {
            let judged = Self.givingUpJudged(within: within, evidence)
            seen += judged.seen
            problems += judged.problems
        }
        let text = seen.joined(separator: "; ")
        if problems.isEmpty { return CheckResult(name: name, passed: true, evidence: text) }
        let said = problems.joined(separator: "; ")
        return CheckResult(name: name, passed: false, evidence: (text.isEmpty ? "" : text + " — ") + said)
    }

    /// A step of the client's: how long it took, when it began, when it ended, what it was.
    typealias Step = (seconds: Double, at: Double, end: Double, what: String)

    /// The steps: each within the budget, the last within `within`, at least `minSteps` of them,
    /// and the client not stopped at its deadline (unless it is to give up by itself).
    static func stepsJudged(
        _ steps: StaysUsableCheck.Steps, _ check: StaysUsableCheck, _ evidence: RunEvidence
    ) -> (seen: [String], problems: [String]) {
        let found = Self.steps(steps, host: check.host, evidence)
        let durations = found.steps
        var seen: [String] = []
        var problems = found.problems
        if let slowest = durations.max(by: { $0.seconds < $1.seconds }) {
            let slowText = slowest.seconds.isFinite ? Self.seconds(slowest.seconds) : "forever"
            let steps = "\(durations.count) step\(durations.count == 1 ? "" : "s")"
            let slowestAt = Self.seconds(slowest.at)
            seen.append("\(steps) (\(found.described)), slowest \(slowText): \(slowest.what) at +\(slowestAt)")
            let over = durations.filter { $0.seconds > check.budget.seconds }
            if !over.isEmpty {
                let steps = "\(over.count) step\(over.count == 1 ? "" : "s")"
                problems.append("\(steps) over the \(formatSeconds(check.budget)) budget")
            }
        } else {
            seen.append("no \(found.described)")
        }
        if let within = check.within, let last = durations.map(\.end).max() {
            if last > within.seconds {
                let ended = last.isFinite ? Self.seconds(last) : "never"
                problems.append("the last step ended at +\(ended) (need all within \(formatSeconds(within)))")
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
        return (seen, problems)
    }

    /// The client's steps: its lines matching a pattern (each from the one before), or its requests
    /// for a glob (each from its arrival to its end); a request that failed is a problem.
    static func steps(
        _ steps: StaysUsableCheck.Steps, host: String?, _ evidence: RunEvidence
    ) -> (steps: [Step], described: String, problems: [String]) {
        var durations: [Step] = []
        var problems: [String] = []
        switch steps {
        case .lines(let pattern):
            let regex = try? NSRegularExpression(pattern: pattern)
            var previous = 0.0
            for line in evidence.lines {
                let range = NSRange(line.text.startIndex..., in: line.text)
                guard regex?.firstMatch(in: line.text, range: range) != nil else { continue }
                durations.append((line.at - previous, line.at, line.at, "'\(Self.clip(line.text))'"))
                previous = line.at
            }
            return (durations, "lines matching '\(pattern)'", problems)
        case .requests(let glob):
            for request in evidence.requests where Self.isStep(request, glob: glob, host: host) {
                guard let ended = request.ended else {
                    let what = "\(request.method) \(request.path) never answered"
                    durations.append((.infinity, request.at, .infinity, what))
                    continue
                }
                let broken = request.cutShort || (request.status ?? 599) >= 400
                let cause = broken ? " (\(Self.failureCause(request)))" : ""
                durations.append((ended - request.at, request.at, ended, "\(request.method) \(request.path)" + cause))
                if broken {
                    problems.append("\(request.method) \(request.path) at +\(Self.seconds(request.at)) failed\(cause)")
                }
            }
            return (durations, "requests for \(glob)" + (host.map { " to \($0)" } ?? ""), problems)
        }
    }

    /// Whether an origin request is a step: its path matches `glob` and, when `host` is given, its
    /// host (as the origin logged it) matches that.
    static func isStep(_ request: RunEvidence.Request, glob: String, host: String?) -> Bool {
        guard fnmatch(glob, request.path, 0) == 0 else { return false }
        guard let host else { return true }
        return fnmatch(host, request.host?.lowercased() ?? "", 0) == 0
    }

    /// Without a network the client ends by itself within `within`, saying why on stderr (not
    /// killed, not silent).
    static func givingUpJudged(within: Span, _ evidence: RunEvidence) -> (seen: [String], problems: [String]) {
        let bound = formatSeconds(within)
        if evidence.timedOut {
            let deadline = formatSeconds(evidence.deadline)
            return ([], ["still running at its \(deadline) deadline (need it to end by itself within \(bound))"])
        }
        guard let exit = evidence.exit else { return ([], ["the client did not run"]) }
        var problems: [String] = []
        let said = Self.lastLine(evidence.stderrTail)
        var ended = "ended by itself after \(Self.seconds(evidence.duration)) (\(Self.describe(exit)))"
        if let said { ended += ", saying '\(Self.clip(said))'" }
        if evidence.duration > within.seconds {
            problems.append("that is later than \(bound)")
        }
        if case .signaled(let signal) = exit {
            problems.append("killed by signal \(signal) (a crash, not a report)")
        } else if exit != .exited(0) && said == nil {
            problems.append("it failed with nothing on stderr (need a message saying why)")
        }
        return ([ended], problems)
    }

    /// The last non-empty line of `text`, or nil.
}
