import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// `backs-off`: the intervals between failed attempts grow, honour Retry-After, and the client
/// comes back after recovery.
extension Checks {

    static func backsOff(_ check: BacksOffCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "backs-off"
        // Attempts: the requests that reached the origin, and the connections that never did.
        let connects = evidence.failedConnects.map { failed in
            var attempt = RunEvidence.Request(at: failed.at, method: "CONNECT", path: "", status: nil, completed: false)
            attempt.connectFailure = failed.outcome
            return attempt
        }
        let attempts = ((check.file.map { evidence.gets(of: $0) } ?? evidence.requests) + connects).sorted {
            $0.at < $1.at
        }
        guard let firstFailure = attempts.firstIndex(where: \.failed) else {
            return CheckResult(
                name: name, passed: false,
                evidence: attempts.isEmpty
                    ? "no attempt reached the origin"
                    : "no attempt failed, so there was nothing to back off from (\(attempts.count) attempts)")
        }
        let lastFailure = attempts.lastIndex(where: \.failed)!
        let window = Array(attempts[firstFailure...min(lastFailure + 1, attempts.count - 1)])
        let times = window.map(\.at)
        let attemptTimes = Self.elided(times.map { "+" + Self.seconds($0) })
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        let gapText = Self.elided(gaps.map { Self.seconds($0) })
        var problems: [String] = []
        if gaps.isEmpty {
            problems.append("the client never retried after the failure at +\(Self.seconds(window[0].at))")
        }
        // Attempts in any 60 s window: the plainest sign of a client hammering.
        let busiest = Self.busiestMinute(times)
        if busiest > check.maxPerMinute {
            problems.append("\(busiest) attempts within a minute (cap \(check.maxPerMinute))")
        }
        problems += Self.gapProblems(gaps, after: window, check)
        if let recovery = check.recovery,
            let problem = Self.recoveryProblem(attempts, lastFailure: lastFailure, within: recovery)
        {
            problems.append(problem)
        }
        let context = Self.backOffContext(window)
        let seen =
            gaps.isEmpty
            ? "1 failed attempt at \(attemptTimes)\(context)"
            : "\(times.count) attempts at \(attemptTimes) (gaps \(gapText))\(context)"
        if problems.isEmpty {
            return CheckResult(name: name, passed: true, evidence: seen)
        }
        let more = problems.count > 2 ? "; and \(problems.count - 2) more" : ""
        let said = problems.prefix(2).joined(separator: "; ") + more
        return CheckResult(name: name, passed: false, evidence: "\(seen) — " + said)
    }

    /// The most attempts within any 60 s (`times` in order).
    static func busiestMinute(_ times: [Double]) -> Int {
        var busiest = 0
        var lower = 0
        for upper in times.indices {
            while times[upper] - times[lower] >= 60 { lower += 1 }
            busiest = max(busiest, upper - lower + 1)
        }
        return busiest
    }

    /// Retries sooner than a `Retry-After` asked, and gaps that do not grow by the check's factor
    /// (the first such gap named; with several, how many).
    static func gapProblems(_ gaps: [Double], after window: [RunEvidence.Request], _ check: BacksOffCheck) -> [String] {
        var problems: [String] = []
        var noGrowth: [String] = []
        for (index, gap) in gaps.enumerated() {
            let failed = window[index]
            if let retryAfter = failed.retryAfter, let seconds = Double(retryAfter) {
                if gap < seconds * (1 - check.jitter) {
                    problems.append("retry \(index + 1) came \(Self.seconds(gap)) after a Retry-After: \(retryAfter)")
                }
            } else if index > 0 {
                let needed = gaps[index - 1] * check.factor * (1 - check.jitter)
                if gap < needed {
                    noGrowth.append("gap \(index + 1) was \(Self.seconds(gap)) after \(Self.seconds(gaps[index - 1]))")
                }
            }
        }
        if noGrowth.count == 1 {
            problems.append("\(noGrowth[0]) (need ≥ ×\(Self.factor(check.factor)))")
        } else if noGrowth.count > 1 {
            problems.append(
                "the gaps do not grow: \(noGrowth.count) of \(gaps.count - 1) are under "
                    + "×\(Self.factor(check.factor)) the one before (\(noGrowth[0]))")
        }
        return problems
    }

    /// The client did not come back (with an attempt that did not fail) within `recovery` of the
    /// last failure; nil when it did.
    static func recoveryProblem(_ attempts: [RunEvidence.Request], lastFailure: Int, within recovery: Span) -> String? {
        let failureEnd = attempts[lastFailure].at
        guard let back = attempts[(lastFailure + 1)...].first(where: { !$0.failed }) else {
            return "never came back after the last failure at +\(Self.seconds(failureEnd))"
        }
        if back.at - failureEnd > recovery.seconds {
            return "came back \(Self.seconds(back.at - failureEnd)) after the last failure "
                + "(need ≤ \(formatSeconds(recovery)))"
        }
        return nil
    }

    /// ` [503 ×3, reset ×1] (Retry-After 2 s)`: the failures' causes, the waits asked for, and the
    /// attempts that reached the origin after their client had closed.
    static func backOffContext(_ window: [RunEvidence.Request]) -> String {
        let retryAfters = Set(window.compactMap(\.retryAfter))
        var causes: [String: Int] = [:]
        for attempt in window where attempt.failed { causes[Self.failureCause(attempt), default: 0] += 1 }
        let causeText = causes.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
        var context = " [\(causeText)]"
        if !retryAfters.isEmpty { context += " (Retry-After \(retryAfters.sorted().joined(separator: ", ")) s)" }
        let late = window.filter { $0.afterClientFIN != nil }
        if !late.isEmpty {
            // On the origin's clock, but sent before: they were on the link when the client closed.
            context +=
                " (\(late.count == 1 ? "1 of them" : "\(late.count) of them") reached the origin after its client had "
                + "closed, already on the link: " + late.map { "+" + Self.seconds($0.at) }.joined(separator: ", ") + ")"
        }
        return context
    }
}
