import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// A check's verdict and the evidence that decided it: one line, then details.
public struct CheckResult: Sendable, Equatable {
    public var name: String
    public var passed: Bool
    /// One line: what was seen, and on failure what was needed.
    public var evidence: String
    public var details: [String]
    /// Why the verdict may not hold on a real network: the decision rested on events the engine
    /// could not show the client as a network would (nil when it did not).
    public var caveat: String?
    /// The moments (seconds since the client started) the verdict rests on, in order.
    public var marks: [Double] = []

    public init(name: String, passed: Bool, evidence: String, details: [String] = [], caveat: String? = nil) {
        self.name = name
        self.passed = passed
        self.evidence = evidence
        self.details = details
        self.caveat = caveat
    }
}

public enum Checks {
    /// The check's verdict, with a caveat when it rests on what the proxy could not show faithfully.
    public static func evaluate(_ spec: CheckSpec, _ evidence: RunEvidence) -> CheckResult {
        var result = self.verdict(spec, evidence)
        // Most serious first: conditions changed from outside, conditions the client slipped past,
        // where netcond's own link fell short, then what the proxy could not show faithfully.
        let caveats = [
            evidence.interventions.isEmpty
                ? nil
                : "the conditions were changed from outside the scenario while it ran: "
                    + evidence.interventions.joined(separator: "; "),
            evidence.bypasses.isEmpty
                ? nil
                : "the link's conditions did not hold for the client: " + evidence.bypasses.joined(separator: "; ")
                    + " (run the client with --user to hold it in)",
            evidence.shortfalls.isEmpty
                ? nil
                : "netcond's link fell short of the profile: " + evidence.shortfalls.joined(separator: "; "),
            ProxyFidelity.caveat(for: spec, evidence),
        ].compactMap { $0 }
        result.caveat = caveats.isEmpty ? nil : caveats.joined(separator: "; ")
        result.marks = self.marks(spec, evidence)
        return result
    }

    static func verdict(_ spec: CheckSpec, _ evidence: RunEvidence) -> CheckResult {
        switch spec {
        case .completes(let check): return self.completes(check, evidence)
        case .resumes(let check): return self.resumes(check, evidence)
        case .backsOff(let check): return self.backsOff(check, evidence)
        case .staysUsable(let check): return self.staysUsable(check, evidence)
        case .idempotent(let check): return self.idempotent(check, evidence)
        case .captiveSafe(let check): return self.captiveSafe(check, evidence)
        case .reconnects(let check): return self.reconnects(check, evidence)
        case .revalidates(let check): return self.revalidates(check, evidence)
        case .overlaps(let check): return self.overlaps(check, evidence)
        case .delivers(let check): return self.delivers(check, evidence)
        case .radio(let check): return self.radio(check, evidence)
        }
    }

    static func lastLine(_ text: String) -> String? {
        text.split(separator: "\n").last { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map(String.init)
    }

    static func clip(_ text: String, to length: Int = 80) -> String {
        text.count > length ? String(text.prefix(length - 1)) + "…" : text
    }

    /// At most eight items, the middle elided: `a b c d e f … z`.
    static func elided(_ items: [String]) -> String {
        guard items.count > 8 else { return items.joined(separator: " ") }
        return (items.prefix(6) + ["…"] + items.suffix(1)).joined(separator: " ")
    }

    /// What made an attempt fail, in a few words: `503`, `refused`, `cut body`, `no answer`.
    static func failureCause(_ attempt: RunEvidence.Request) -> String {
        if let failure = attempt.connectFailure { return failure.rawValue }
        guard let status = attempt.status else { return "no answer" }
        if status >= 400 { return String(status) }
        return attempt.cutByNetwork ? "cut body" : "ok"
    }

    // MARK: formatting

    static func seconds(_ value: Double) -> String { String(format: "%.2fs", value) }
    static func factor(_ value: Double) -> String { String(format: "%g", value) }
    /// `2,097,152`: exact byte counts, grouped in thousands.
    static func bytes(_ value: Int64) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return (value < 0 ? "-" : "") + grouped
    }

    static func describe(_ exit: ExitStatus) -> String {
        switch exit {
        case .exited(let code): return "exit \(code)"
        case .signaled(let signal): return "killed by signal \(signal)"
        }
    }
}
