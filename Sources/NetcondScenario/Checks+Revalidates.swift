import NetcondCore

/// `revalidates`: once the client has a whole copy of a resource that does not change, it asks
/// whether it changed (a conditional GET, answered 304 by the origin) instead of downloading it
/// again. Read from the origin's log alone: whether a GET was conditional is what it sent, and the
/// 304 is the origin's own decision (a validator that does not match gets the whole answer), so a
/// client cannot claim a revalidation it did not make.
///
/// ```
///  GET            → 200, 262,144 B     the first whole copy (fetches before it are not judged)
///  GET If-None-Match: "…" → 304        revalidated: 262,144 B saved
///  GET            → 200, 262,144 B     ✗ unconditional: downloaded again
/// ```
extension Checks {

    static func revalidates(_ check: RevalidatesCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "revalidates"
        let path = check.path
        let fetches = evidence.requests.filter { $0.method == "GET" && $0.path == path }
        let details = fetches.enumerated().map { index, fetch in Self.describeFetch(fetch, index: index) }
        guard !fetches.isEmpty else {
            return CheckResult(name: name, passed: false, evidence: "no GET of \(path) reached the origin")
        }
        // The first whole copy the client got: only later fetches could revalidate it.
        guard let first = fetches.firstIndex(where: { $0.status == 200 && !$0.cutShort }) else {
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "\(Self.count(fetches.count, "fetch", "fetches")) of \(path), none of which brought the client a whole copy: nothing to revalidate ("
                    + Self.elided(details.map { "(\($0))" }) + ")",
                details: details)
        }
        let full = fetches[first].bodyBytesSent
        var revalidated = 0
        var failures: [String] = []
        for index in fetches.indices where index > first {
            let fetch = fetches[index]
            let which = "\(Self.ordinal(index + 1)) fetch at \(Self.seconds(fetch.at))"
            if fetch.status == 304, Self.namesItsCopy(fetch.condition) {
                revalidated += 1
            } else if fetch.status == 304 {
                // `If-None-Match: *` is answered 304 whatever the copy: it asks whether anything
                // exists, not whether the client's own copy changed.
                failures.append(
                    "\(which) asked with \(Self.clip(fetch.condition ?? "", to: 60)), which names no copy of its own (a 304 to it says nothing of what the client holds)"
                )
            } else if fetch.condition == nil {
                failures.append("\(which) was unconditional: \(Self.downloaded(fetch))")
            } else if fetch.status == 200 || fetch.status == 206 {
                failures.append(
                    "\(which) sent a validator that did not match (\(Self.clip(fetch.condition ?? "", to: 60))): \(Self.downloaded(fetch))"
                )
            }
            // A conditional fetch the link or the server left unanswered neither revalidated nor
            // downloaded anything: it is in the details, and judged by the fetches that follow.
        }
        if let failure = failures.first {
            let more = failures.count > 1 ? " (and \(failures.count - 1) more)" : ""
            return CheckResult(name: name, passed: false, evidence: failure + more, details: details)
        }
        let counted = 1 + revalidated
        let summary =
            "\(Self.count(fetches.count, "fetch", "fetches")) of \(path): 1 full (\(Self.bytes(full)) B), \(revalidated) revalidated → 304 (\(Self.bytes(full * Int64(revalidated))) B saved)"
        guard counted >= check.minFetches else {
            let why =
                revalidated == 0
                ? "the client never asked for it again" : "the client asked for it again too few times"
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "\(summary) — \(why) (min_fetches: \(check.minFetches), the whole copy and its revalidations)",
                details: details)
        }
        return CheckResult(name: name, passed: true, evidence: summary, details: details)
    }

    /// `+0.31s 200, 262,144 B` / `+2.10s If-None-Match: "…" → 304`.
    private static func describeFetch(_ fetch: RunEvidence.Request, index: Int) -> String {
        var text = "+\(Self.seconds(fetch.at)) "
        if let condition = fetch.condition { text += Self.clip(condition, to: 60) + " → " }
        text += fetch.status.map(String.init) ?? "no answer"
        if fetch.bodyBytesSent > 0 { text += ", \(Self.bytes(fetch.bodyBytesReceived)) B" }
        if fetch.cutByNetwork { text += " (cut short)" }
        return text
    }

    /// `262,144 B downloaded again`, or what of it the link let through.
    private static func downloaded(_ fetch: RunEvidence.Request) -> String {
        guard fetch.cutByNetwork else { return "\(Self.bytes(fetch.bodyBytesReceived)) B downloaded again" }
        return "\(Self.bytes(fetch.bodyBytesReceived)) B downloaded again before it was cut"
    }

    /// `1st`, `2nd`, `3rd`, `11th`, `22nd`.
    static func ordinal(_ n: Int) -> String {
        let suffix: String
        switch (n % 10, n % 100) {
        case (_, 11...13): suffix = "th"
        case (1, _): suffix = "st"
        case (2, _): suffix = "nd"
        case (3, _): suffix = "rd"
        default: suffix = "th"
        }
        return "\(n)\(suffix)"
    }

    /// `1 fetch`, `3 fetches`.
    static func count(_ n: Int, _ one: String, _ many: String) -> String {
        "\(n) \(n == 1 ? one : many)"
    }

    /// A condition that names the client's own copy: an entity tag, or a date (not `*`).
    static func namesItsCopy(_ condition: String?) -> Bool {
        guard let condition else { return false }
        let value = condition.drop { $0 != ":" }.dropFirst().trimmingCharacters(in: .whitespaces)
        return !(condition.lowercased().hasPrefix("if-none-match") && value == "*")
    }
}
