import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// `resumes`: after a cut, the next request for the resource asks for the rest (`Range`).
extension Checks {

    static func resumes(_ check: ResumesCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "resumes"
        guard let file = evidence.origin.file(named: check.file) else {
            return CheckResult(name: name, passed: false, evidence: "no file \(check.file) at the origin")
        }
        let gets = evidence.gets(of: check.file)
        var details: [String] = []
        var cuts = 0
        for (index, request) in gets.enumerated() where request.bodyBytesReceived > 0 && request.cutByNetwork {
            cuts += 1
            // Where the client's copy ends: what the response started at plus what reached it.
            let had = (request.status == 206 ? request.rangeStart ?? 0 : 0) + request.bodyBytesReceived
            // Who cut it, when known: the link (a cut, a reset outage) or the origin's own fault;
            // else a proxy fault or the client leaving look alike from here.
            let cutter =
                request.linkCut.map { "the link \($0.pastTense) it" }
                ?? Self.originCut(request).map { "the origin's fault: \($0)" }
            guard index + 1 < gets.count else {
                return CheckResult(
                    name: name, passed: false,
                    evidence:
                        "cut at byte \(Self.bytes(had)) (+\(Self.seconds(request.at))\(cutter.map { "; " + $0 } ?? "")), and the client never asked again",
                    details: details)
            }
            let next = gets[index + 1]
            let after =
                request.ended.map { "+\(Self.seconds(next.at - $0)) after \(cutter ?? "the cut")" }
                ?? "+\(Self.seconds(next.at - request.at)) after the cut request began"
            guard let start = next.rangeStart else {
                return CheckResult(
                    name: name, passed: false,
                    evidence:
                        "cut at byte \(Self.bytes(had)); the next request asked for the whole file again (no Range, \(after))",
                    details: details)
            }
            guard start <= had + request.undeliveredUncertainty, start >= had - check.slack.bytes else {
                return CheckResult(
                    name: name, passed: false,
                    evidence:
                        "cut at byte \(Self.bytes(had)); the next request asked Range: bytes=\(start)- (need \(Self.bytes(max(0, had - check.slack.bytes)))…\(Self.bytes(had)))",
                    details: details)
            }
            details.append("cut at \(Self.bytes(had)) → Range: bytes=\(start)- (\(after))")
        }
        guard cuts > 0 else {
            return CheckResult(
                name: name, passed: false,
                evidence: gets.isEmpty
                    ? "the client never asked for \(file.path)"
                    : "no response for \(file.path) was cut, so nothing had to resume (\(gets.count) request\(gets.count == 1 ? "" : "s"))"
            )
        }
        // What reached the client: bytes the origin wrote into buffers a cut then threw away were
        // never the client's to re-download.
        let served = gets.reduce(Int64(0)) { $0 + $1.bodyBytesReceived }
        let ratio = Double(served) / Double(file.size.bytes)
        let servedText =
            "\(Self.bytes(served)) received for a \(Self.bytes(file.size.bytes)) file (\(String(format: "%.2f", ratio))×)"
        guard ratio <= 1 + check.tolerance else {
            return CheckResult(
                name: name, passed: false,
                evidence: details.joined(separator: "; ")
                    + "; but \(servedText), need ≤ \(String(format: "%.2f", 1 + check.tolerance))×",
                details: details)
        }
        return CheckResult(
            name: name, passed: true, evidence: details.joined(separator: "; ") + "; \(servedText)", details: details)
    }

    /// The origin's own cut of this request (`cut after 600 KB`), when that is what ended it.
    private static func originCut(_ request: RunEvidence.Request) -> String? {
        guard case .cut = request.originFault, !request.completed else { return nil }
        return request.originFault?.description
    }
}
