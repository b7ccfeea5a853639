import NetcondCore

/// `reconnects`: after a handover (the device moved to another network; its connections were
/// stranded, nothing telling either end), the client noticed and went on from where it was. Each
/// handover is judged on the requests in flight at it (asked after the handover before it, their
/// answers never whole at the client): each was asked again, the first time within `within` of
/// the new network being up, and answered whole — a file to its last byte, over as many ranges as
/// the client asked for, the first starting where it was (`resume`); an answer 304 to a
/// conditional ask is whole too.
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
        var idle: [String] = []
        for (index, handover) in evidence.handovers.enumerated() {
            let since = index > 0 ? evidence.handovers[index - 1].at : -Double.infinity
            guard let judged = Self.reconnected(after: handover, since: since, check, evidence) else {
                idle.append("+\(Self.seconds(handover.at))")  // nothing in flight: nothing to notice there
                continue
            }
            if !judged.passed { return CheckResult(name: name, passed: false, evidence: judged.text, details: details) }
            lines.append(judged.text)
            details += judged.details
        }
        guard !lines.isEmpty else {
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "nothing was in flight at the handover\(idle.count == 1 ? "" : "s") (\(idle.joined(separator: ", "))), so "
                    + "there was nothing to notice: the handover came too soon or too late to judge")
        }
        if !idle.isEmpty { details.append("nothing in flight at \(idle.joined(separator: ", ")): not judged") }
        return CheckResult(name: name, passed: true, evidence: lines.joined(separator: "; "), details: details)
    }

    /// One handover's verdict and its evidence (`since`: the handover before it, whose own stranded
    /// requests are not this one's).
    private static func reconnected(
        after handover: RunEvidence.Handover, since: Double, _ check: ReconnectsCheck, _ evidence: RunEvidence
    ) -> (passed: Bool, text: String, details: [String])? {
        let within = check.within.seconds
        let head =
            "handover at +\(Self.seconds(handover.at)) (to \(handover.to), the new network up at "
            + "+\(Self.seconds(handover.back)))"
        // In flight: asked before the handover (and after the one before), its answer never whole
        // at the client (the origin's own finish is no guide: it may have handed the whole body to
        // socket buffers long before).
        let stranded = evidence.requests.filter { $0.at < handover.at && $0.at > since && $0.cutShort }
        guard !stranded.isEmpty else { return nil }
        let what = Self.elided(stranded.map { "\($0.method) \($0.path)" })
        var details: [String] = []
        for request in stranded {
            let again = evidence.requests.filter {
                $0.at > handover.at && $0.method == request.method && $0.path == request.path
            }
            guard let first = again.first else {
                let waited = max(0, evidence.duration - handover.back)
                return (
                    false,
                    "\(head): \(what) stranded; \(request.method) \(request.path) was not asked again in the "
                        + "\(Self.seconds(waited)) after the network was up: the client never noticed its connection was "
                        + "gone (a read with no time-out waits forever)",
                    details
                )
            }
            let late = first.at - handover.back
            guard late <= within else {
                return (
                    false,
                    "\(head): \(what) stranded; the client asked for \(request.path) again at "
                        + "+\(Self.seconds(first.at)), \(Self.seconds(late)) after the network was up; allowed ≤ "
                        + "\(Self.seconds(within))",
                    details
                )
            }
            let how =
                first.range.map { "Range: \($0) → \(first.status ?? 0)" } ?? "from the start → \(first.status ?? 0)"
            // What the client had of a file: where the stranded answer started, and what reached it.
            let had = (request.status == 206 ? request.rangeStart ?? 0 : 0) + request.bodyBytesReceived
            if check.resume, request.path.hasPrefix("/files/"), request.bodyBytesReceived > 0,
                (first.rangeStart ?? 0) == 0 || first.rangeStart! > had + request.undeliveredUncertainty
            {
                return (
                    false,
                    "\(head): the client asked again at +\(Self.seconds(first.at)) but not from where it was: it had "
                        + "\(Self.bytes(had)) B of \(request.path) and asked for it \(how) "
                        + "(resume: false accepts a download started again)",
                    details
                )
            }
            guard Self.answeredWhole(again, evidence) else {
                return (
                    false,
                    "\(head): the client asked again at +\(Self.seconds(first.at)) but never got \(request.method) "
                        + "\(request.path) answered whole after the handover (\(again.count) request"
                        + "\(again.count == 1 ? "" : "s") for it)",
                    details
                )
            }
            details.append(
                "\(request.method) \(request.path): asked again at +\(Self.seconds(first.at)), \(Self.seconds(max(0, late))) "
                    + "after the network was up (\(how))")
        }
        let text =
            "\(head): \(what) stranded; the client asked again " + (stranded.count == 1 ? "" : "for each ")
            + "within \(Self.seconds(within)) of the network being up, and got " + (stranded.count == 1 ? "it" : "each")
            + " whole"
        return (true, text, details)
    }

    /// The asks after the handover answered the resource whole: an answer 304 (the client's copy
    /// stands), or for an origin file its bytes to the last, over the ranges answered (contiguous
    /// from where the asks began); for anything else a success that reached the client whole.
    private static func answeredWhole(_ asks: [RunEvidence.Request], _ evidence: RunEvidence) -> Bool {
        let answered = asks.filter { $0.completed && !$0.cutShort }
        if answered.contains(where: { $0.status == 304 }) { return true }
        let good = answered.filter { ($0.status ?? 0) / 100 == 2 }
        guard let path = good.first?.path else { return false }
        guard let name = OriginFile.name(inPath: path), let size = evidence.origin.file(named: name)?.size.bytes else {
            return true
        }
        // Each answer's span of the file: a 200 the whole of it, a 206 its range (to the end when open).
        let spans = good.map { answer -> (Int64, Int64) in
            guard answer.status == 206, let start = answer.rangeStart else { return (0, size - 1) }
            return (start, min(answer.rangeEnd ?? size - 1, size - 1))
        }.sorted { $0.0 < $1.0 }
        var covered = spans[0].0 - 1
        for (start, end) in spans where start <= covered + 1 { covered = max(covered, end) }
        return covered >= size - 1
    }
}
