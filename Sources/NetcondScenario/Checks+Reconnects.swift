import NetcondCore

/// `reconnects`: after a handover (the device moved to another network; its connections were
/// stranded, nothing telling either end), the client noticed and went on. Each handover is judged:
/// the requests in flight at it (asked before it, their answers never whole at the client), the first request
/// that reached the origin once the new network was up (noticed within `within` of that moment),
/// and whether each stranded request was asked again and answered whole.
extension Checks {
    static func reconnects(_ check: ReconnectsCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "reconnects"
        guard !evidence.handovers.isEmpty else {
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "no handover happened in the run (the timeline's handover never came: its trigger did not fire)"
            )
        }
        var lines: [String] = []
        var details: [String] = []
        for handover in evidence.handovers {
            let judged = Self.reconnected(after: handover, check, evidence)
            if !judged.passed { return CheckResult(name: name, passed: false, evidence: judged.text, details: details) }
            lines.append(judged.text)
            details += judged.details
        }
        return CheckResult(name: name, passed: true, evidence: lines.joined(separator: "; "), details: details)
    }

    /// One handover's verdict and its evidence.
    private static func reconnected(
        after handover: RunEvidence.Handover, _ check: ReconnectsCheck, _ evidence: RunEvidence
    )
        -> (passed: Bool, text: String, details: [String])
    {
        let within = check.within.seconds
        let head =
            "handover at +\(Self.seconds(handover.at)) (to \(handover.to), the new network up at "
            + "+\(Self.seconds(handover.back)))"
        // In flight: asked before the handover, its answer never whole at the client (the origin's
        // own finish is no guide: it may have handed the whole body to socket buffers long before).
        let stranded = evidence.requests.filter { $0.at < handover.at && $0.cutShort }
        guard !stranded.isEmpty else {
            return (
                false,
                "\(head): nothing was in flight then, so there was nothing to notice (the handover came too soon or too late to judge)",
                []
            )
        }
        let after = evidence.requests.filter { $0.at > handover.at }
        let what = Self.elided(stranded.map { "\($0.method) \($0.path)" })
        guard let first = after.first else {
            let waited = max(0, evidence.duration - handover.back)
            return (
                false,
                "\(head): \(what) stranded; no request reached the origin in the \(Self.seconds(waited)) after the "
                    + "network was up: the client never noticed its connection was gone (a read with no time-out waits forever)",
                []
            )
        }
        let late = first.at - handover.back
        guard late <= within else {
            return (
                false,
                "\(head): \(what) stranded; the client asked again at +\(Self.seconds(first.at)), \(Self.seconds(late)) "
                    + "after the network was up; allowed ≤ \(Self.seconds(within))",
                []
            )
        }
        var details: [String] = []
        for request in stranded {
            let again = after.filter { $0.method == request.method && $0.path == request.path }
            guard let whole = again.first(where: { ($0.status ?? 0) / 100 == 2 && $0.completed && !$0.cutShort }) else {
                return (
                    false,
                    "\(head): the client asked again at +\(Self.seconds(first.at)) but never got \(request.method) "
                        + "\(request.path) answered whole after the handover (\(again.count) request"
                        + "\(again.count == 1 ? "" : "s") for it)",
                    details
                )
            }
            let how =
                whole.range.map { "Range: \($0) → \(whole.status ?? 0)" } ?? "from the start → \(whole.status ?? 0)"
            // What the client had of a file: where the stranded request started, and what reached it.
            let had = (request.rangeStart ?? 0) + request.bodyBytesReceived
            if check.resume, request.path.hasPrefix("/files/"), request.bodyBytesReceived > 0,
                (whole.rangeStart ?? 0) == 0 || whole.rangeStart! > had + request.undeliveredUncertainty
            {
                return (
                    false,
                    "\(head): the client asked again at +\(Self.seconds(first.at)) but not from where it was: it had "
                        + "\(Self.bytes(had)) B of \(request.path) and asked for it \(how) "
                        + "(resume: false accepts a download started again)",
                    details
                )
            }
            details.append("\(request.method) \(request.path): asked again at +\(Self.seconds(whole.at)) (\(how))")
        }
        let text =
            "\(head): \(what) stranded; the client asked again at +\(Self.seconds(first.at)), "
            + "\(Self.seconds(max(0, late))) after the network was up (allowed ≤ \(Self.seconds(within))), and got "
            + (stranded.count == 1 ? "it" : "each") + " whole"
        return (true, text, details)
    }
}
