import Foundation
import NetcondCore

/// The readable report of scenario runs: one line per check with its evidence, and for a failure
/// the command that repeats the run.
public enum ScenarioReport {
    public static func header(_ scenario: Scenario, seed: UInt64, command: [String], engine: RunEngine = .proxy)
        -> String
    {
        let through = engine == .packet ? ", packet engine" : ""
        var text =
            "netcond: scenario \(scenario.name) (\(scenario.file)), profile \(scenario.profile.name)\(through), seed \(seed)\n"
        if !scenario.description.isEmpty { text += "  \(scenario.description)\n" }
        text += "  client: \(self.shellLine(command))"
        return text
    }

    /// `✓ completes — exit 0 after 3.10s; …` lines, each followed by its caveat (`  ⚠ not exact: …`) if any.
    public static func checkLines(_ outcome: ScenarioOutcome) -> [String] {
        if outcome.results.isEmpty { return ["✗ \(ScenarioOutcome.nothingJudged)"] }
        return outcome.results.flatMap { result in
            ["\(result.passed ? "✓" : "✗") \(result.name) — \(result.evidence)"]
                + (result.caveat.map { ["  ⚠ not exact: \($0)"] } ?? [])
        }
    }

    public static func verdictLine(_ outcome: ScenarioOutcome, scenarioArgument: String) -> String {
        let failed = outcome.results.filter { !$0.passed }.count
        let inexact = outcome.results.filter { $0.caveat != nil }.count
        let caveats =
            inexact == 0
            ? ""
            : !outcome.evidence.interventions.isEmpty
                ? "; the conditions were changed from outside, see ⚠"
                : !outcome.evidence.bypasses.isEmpty
                    ? "; the link's conditions did not hold for the client, see ⚠"
                    : !outcome.evidence.shortfalls.isEmpty
                        ? "; netcond's link fell short of the profile, see ⚠"
                        : "; \(inexact) not exact through the proxy, see ⚠"
        if outcome.results.isEmpty {
            return "netcond: \(outcome.scenario.name) FAILED (\(ScenarioOutcome.nothingJudged))"
        }
        if failed == 0 {
            return
                "netcond: \(outcome.scenario.name) passed (\(outcome.results.count) check\(outcome.results.count == 1 ? "" : "s"), client ran \(String(format: "%.1f", outcome.evidence.duration)) s\(caveats))"
        }
        return
            "netcond: \(outcome.scenario.name) FAILED (\(failed) of \(outcome.results.count) checks\(caveats)); \(self.repeatLine(outcome, scenarioArgument: scenarioArgument))"
    }

    /// `repeat with: netcond run FILE --seed N [-- COMMAND]` (the command only when it is not the scenario's own).
    public static func repeatLine(_ outcome: ScenarioOutcome, scenarioArgument: String) -> String {
        var words = ["netcond", "run", scenarioArgument, "--seed", String(outcome.seed)]
        if outcome.evidence.engine == .packet && outcome.scenario.engine != .packet { words += ["--engine", "packet"] }
        if outcome.command != outcome.scenario.client.command { words += ["--"] + outcome.command }
        return "repeat with: \(self.shellLine(words))"
    }

    /// Words joined for a shell: plain words as they are, others in single quotes.
    public static func shellLine(_ words: [String]) -> String {
        words.map { word in
            let plain =
                !word.isEmpty
                && word.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_./=:,+@%".contains($0)) }
            return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }
}
