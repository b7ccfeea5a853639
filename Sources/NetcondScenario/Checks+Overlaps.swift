import NetcondCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `overlaps`: independent requests are sent together, not one after the other; under latency the
/// sequential order adds a round trip per request.
///
/// Judged from the origin's log, the same in both engines (the link lies between the client and
/// the origin in each): a request is in flight from its arrival at the origin until its answer
/// could have crossed the link back and a request sent upon it have come up again: its end at the
/// origin plus the link's least round trip (three quarters of it, for the stamps' own delays on a
/// loaded machine). A request that arrives within that window was sent before the client could
/// have had the other's answer, so the two were outstanding at once at the client too: the count
/// never claims more overlap than the client had. A client that waits for each answer shows 1.
///
/// ```
///  origin   a ├──┤·······rtt·······│            sequential: b arrives after a's window
///           b                        ├──┤·······rtt·······│
///  origin   a ├──┤·······rtt·······│            parallel: b, c arrive inside a's window
///           b  ├──┤·······rtt·······│
///           c   ├───┤·······rtt·······│  → 3 in flight at once
/// ```
extension Checks {

    static func overlaps(_ check: OverlapsCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "overlaps"
        let requests = Self.overlapping(check, evidence)
        let what = "\(check.requests)" + (check.host.map { " on \($0)" } ?? "")
        guard !requests.isEmpty else {
            return CheckResult(name: name, passed: false, evidence: "no request of \(what) reached the origin")
        }
        let rtt = max(0, evidence.linkRoundTrip)
        let end = evidence.timedOut ? evidence.deadline.seconds : evidence.duration
        // A quarter of the round trip is left out for the moments the origin stamps (its end is noted
        // a little after its last byte left, later on a loaded machine): a client that waits for
        // each answer never shows 2.
        let reach = rtt * Self.roundTripCounted
        let windows = requests.map { request in (request.at, max(request.at, request.ended ?? end) + reach) }
        // Different resources (host and path): the same one asked for twice at once is no page
        // loaded in parallel.
        // The host as the origin tells names apart (case and a default port make no other resource).
        let resources = requests.map { Self.resourceKey(host: $0.host, path: $0.path) }
        let inFlight = Self.mostAtOnce(windows, of: resources)
        let different = Set(resources).count
        let first = windows.map(\.0).min() ?? 0
        let last = (windows.map(\.1).max() ?? 0) + (rtt - reach)
        let sequential = windows.reduce(0) { $0 + ($1.1 - $1.0) + (rtt - reach) }
        let details = requests.map { request in
            "+\(Self.seconds(request.at)) \(request.method) \(request.path) → "
                + (request.status.map(String.init) ?? "no answer")
                + (request.ended.map { ", its answer out at +\(Self.seconds($0))" } ?? "")
        }
        let timing =
            "\(Self.seconds(last - first)) from the first's arrival to the last's answer and a round trip, one after another at least \(Self.seconds(sequential)) (each its own time at the origin and the link's \(Self.milliseconds(rtt)) round trip)"
        let count = "\(Self.count(requests.count, "request", "requests")) of \(what)"
        guard different >= check.minRequests else {
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "\(count), only \(different) different (min_requests: \(check.minRequests)); up to \(inFlight) in flight at once",
                details: details)
        }
        guard inFlight >= check.minInFlight else {
            let how =
                inFlight == 1
                ? "each sent only once the one before had been answered" : "the rest waited for answers"
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "\(count): at most \(inFlight) in flight at once (\(check.minInFlight) wanted), \(how); \(timing)",
                details: details)
        }
        return CheckResult(
            name: name, passed: true,
            evidence: "\(count): up to \(inFlight) in flight at once (\(check.minInFlight) wanted); \(timing)",
            details: details)
    }

    /// The share of the link's round trip a request's window reaches past its end at the origin.
    static let roundTripCounted = 0.75

    /// The requests the check judges, in arrival order.
    static func overlapping(_ check: OverlapsCheck, _ evidence: RunEvidence) -> [RunEvidence.Request] {
        evidence.requests.filter { Self.isStep($0, glob: check.requests, host: check.host) }
    }

    /// The most different resources whose half-open windows `[from, to)` hold one moment.
    static func mostAtOnce(_ windows: [(Double, Double)], of resources: [String]) -> Int {
        // Ends before starts at the same moment: a window that closes as another opens never overlaps it.
        let opens: [(at: Double, step: Int, resource: String)] = zip(windows, resources).map { ($0.0.0, 1, $0.1) }
        let closes: [(at: Double, step: Int, resource: String)] = zip(windows, resources).map { ($0.0.1, -1, $0.1) }
        let edges = (opens + closes).sorted { a, b in a.at < b.at || (a.at == b.at && a.step < b.step) }
        var open: [String: Int] = [:]
        var most = 0
        for edge in edges {
            open[edge.resource, default: 0] += edge.step
            if open[edge.resource] == 0 { open[edge.resource] = nil }
            most = max(most, open.count)
        }
        return most
    }

    /// A request's resource: its host without case or a default port, and its path.
    static func resourceKey(host: String?, path: String) -> String {
        var name = (host ?? "").lowercased()
        for port in [":80", ":443"] where name.hasSuffix(port) { name.removeLast(port.count) }
        return name + path
    }

    /// `680 ms`.
    static func milliseconds(_ seconds: Double) -> String {
        "\(Int((seconds * 1000).rounded())) ms"
    }
}

extension Scenario {
    /// The least round trip the link gives in this scenario (seconds): the base latencies of its
    /// profile, of its schedule's phases, or of the quickest profile its timeline switches or hands
    /// over to, or of a phase of theirs (jitter only adds delay).
    public var leastRoundTrip: Double {
        var profiles = [self.profile]
        for event in self.timeline {
            if let profile = event.action.profileSwitchedTo { profiles.append(profile) }
        }
        let phases = profiles.flatMap { profile in
            (profile.schedule?.phases ?? []).map { ($0.conditions.up.latency + $0.conditions.down.latency).seconds }
        }
        return (profiles.map(\.baseRTT.seconds) + phases).min() ?? 0
    }

}
