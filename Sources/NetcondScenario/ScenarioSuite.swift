import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// `netcond test`: which scenario files a set of paths names, which of them a filter keeps, and
/// the reports (JUnit XML, JSON) of the runs. Pure apart from reading the file system.
public enum ScenarioSuite {
    /// A path that names no scenario, or names one that cannot be read.
    public struct DiscoveryError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The scenario files `paths` name, in order: a file as given; a directory's `*.yaml` / `*.yml`
    /// files (recursively, sorted by path). Well-formed YAML files in a directory that are surely not
    /// scenarios (profiles kept alongside: no `checks:`, no `client:`) are returned in `skipped`;
    /// a malformed or unreadable one is kept, so that decoding it reports the error.
    public static func discover(_ paths: [String]) throws(DiscoveryError) -> (files: [String], skipped: [String]) {
        var files: [String] = []
        var skipped: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw DiscoveryError(
                    description: "\(path): no such file or directory; give scenario files or folders of them")
            }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            let found = Self.yamlFiles(in: path)
            var any = false
            for file in found {
                if ScenarioDecoder.isSurelyNotScenario(atPath: file) {
                    skipped.append(file)
                } else {
                    files.append(file)
                    any = true
                }
            }
            if !any {
                throw DiscoveryError(description: "\(path): no scenario files in this folder (*.yaml with 'checks:')")
            }
        }
        var seen = Set<String>()
        files = files.filter { seen.insert(($0 as NSString).standardizingPath).inserted }
        return (files, skipped)
    }

    private static func yamlFiles(in directory: String) -> [String] {
        // The folder itself may be a symbolic link (a monorepo's shared Scenarios/): enumerated
        // through its target, named as given.
        let target = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        guard let enumerator = FileManager.default.enumerator(atPath: target) else { return [] }
        var files: [String] = []
        while let relative = enumerator.nextObject() as? String {
            let lower = relative.lowercased()
            guard lower.hasSuffix(".yaml") || lower.hasSuffix(".yml") else { continue }
            let base = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
            files.append(base + "/" + relative)
        }
        return files.sorted()
    }

    /// True when `name` matches one of `patterns` (all match when there are none). A pattern with
    /// `*`, `?` or `[` is a shell glob on the whole name; any other is a substring.
    public static func matches(_ name: String, patterns: [String]) -> Bool {
        if patterns.isEmpty { return true }
        return patterns.contains { pattern in
            if pattern.contains(where: { "*?[".contains($0) }) {
                return fnmatch(pattern, name, 0) == 0
            }
            return name.localizedCaseInsensitiveContains(pattern)
        }
    }

    // MARK: - Results

    /// One scenario's result in a suite run.
    public enum Result: Sendable {
        case ran(ScenarioOutcome)
        /// netcond could not run it (or its client could not start, or it was interrupted): the scenario and why.
        case error(Scenario, String)

        public var scenario: Scenario {
            switch self {
            case .ran(let outcome): return outcome.scenario
            case .error(let scenario, _): return scenario
            }
        }

        public var passed: Bool {
            if case .ran(let outcome) = self { return outcome.passed }
            return false
        }

        /// It ran, and a check failed.
        public var failed: Bool {
            if case .ran(let outcome) = self { return !outcome.passed }
            return false
        }

        public var isError: Bool {
            if case .error = self { return true }
            return false
        }
    }

    /// `netcond test`'s exit code: 3 when a scenario could not be run (netcond failed, or the client
    /// could not start), else 1 when one failed, else 0.
    public static func exitCode(_ results: [Result]) -> Int32 {
        if results.contains(where: \.isError) { return 3 }
        return results.allSatisfy(\.passed) ? 0 : 1
    }

    /// `12 scenarios: 10 passed, 1 failed (stall-mid-body), 1 error (slow-server-45s) in 3m 12s`.
    public static func summaryLine(_ results: [Result], seconds: Double) -> String {
        let passed = results.filter(\.passed)
        let failed = results.filter(\.failed)
        let errors = results.filter(\.isError)
        var parts = ["\(passed.count) passed"]
        if !failed.isEmpty {
            parts.append("\(failed.count) failed (\(failed.map(\.scenario.name).joined(separator: ", ")))")
        }
        if !errors.isEmpty {
            parts.append("\(errors.count) could not run (\(errors.map(\.scenario.name).joined(separator: ", ")))")
        }
        let count = "\(results.count) scenario\(results.count == 1 ? "" : "s")"
        return "\(count): \(parts.joined(separator: ", ")) in \(Self.duration(seconds))"
    }

    static func duration(_ seconds: Double) -> String {
        seconds < 60 ? String(format: "%.1f s", seconds) : "\(Int(seconds) / 60) min \(Int(seconds) % 60) s"
    }

    // MARK: - JUnit

    /// JUnit XML: one `<testcase>` per scenario (classname `netcond.<folder>`), a `<failure>` per
    /// failed scenario whose message is the first failed check's evidence and whose text has every
    /// check line and the command that repeats the run; netcond's own failures are `<error>`s.
    /// A part of a sharded run names its suite `netcond scenarios (part I of N)`; its test cases keep
    /// their names, so CI systems merge the parts' files into one list.
    public static func junit(_ results: [Result], seconds: Double, shard: ScenarioShard? = nil) -> String {
        let failures = results.filter(\.failed).count
        let errors = results.filter(\.isError).count
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        xml +=
            "<testsuites name=\"netcond\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"\(errors)\" time=\"\(Self.time(seconds))\">\n"
        let suite = shard.map { "netcond scenarios (part \($0.index) of \($0.count))" } ?? "netcond scenarios"
        xml +=
            "  <testsuite name=\"\(suite)\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"\(errors)\" skipped=\"0\" time=\"\(Self.time(seconds))\" timestamp=\"\(Self.timestamp())\">\n"
        for result in results {
            let scenario = result.scenario
            let folder = ((scenario.file as NSString).deletingLastPathComponent as NSString).lastPathComponent
            let classname = "netcond." + (folder.isEmpty ? "scenarios" : folder)
            let time: Double
            if case .ran(let outcome) = result { time = outcome.evidence.duration } else { time = 0 }
            xml +=
                "    <testcase classname=\"\(Self.escape(classname))\" name=\"\(Self.escape(scenario.name))\" file=\"\(Self.escape(scenario.file))\" time=\"\(Self.time(time))\">\n"
            switch result {
            case .ran(let outcome):
                let lines = ScenarioReport.checkLines(outcome)
                if !outcome.passed {
                    let first = outcome.results.first { !$0.passed }
                    let (type, message) =
                        first.map { ($0.name, "\($0.name): \($0.evidence)") } ?? (
                            "no-checks", ScenarioOutcome.nothingJudged
                        )
                    var text = lines.joined(separator: "\n")
                    text += "\n" + ScenarioReport.repeatLine(outcome, scenarioArgument: scenario.file)
                    xml +=
                        "      <failure type=\"\(Self.escape(type))\" message=\"\(Self.escape(message))\">\(Self.escape(text))</failure>\n"
                }
                var out = [
                    ScenarioReport.header(
                        scenario, seed: outcome.seed, command: outcome.command,
                        engine: outcome.evidence.engine == .packet ? .packet : .proxy)
                ]
                out += outcome.applied.map { String(format: "+%.1f s  ", $0.at) + $0.what }
                out += lines
                out.append("netcond: " + outcome.linkSummary)
                if !outcome.clientOutput.tail.isEmpty {
                    out += ["", "client output (stdout and stderr, the end):", outcome.clientOutput.tail]
                }
                xml += "      <system-out>\(Self.escape(out.joined(separator: "\n")))</system-out>\n"
                if !outcome.clientOutput.stderrTail.isEmpty {
                    xml += "      <system-err>\(Self.escape(outcome.clientOutput.stderrTail))</system-err>\n"
                }
            case .error(_, let message):
                xml += "      <error type=\"netcond\" message=\"\(Self.escape(message))\"/>\n"
            }
            xml += "    </testcase>\n"
        }
        xml += "  </testsuite>\n</testsuites>\n"
        return xml
    }

    /// Escapes text for XML content and attributes; drops characters XML 1.0 cannot carry.
    static func escape(_ text: String) -> String { Markup.escaped(text) }

    private static func time(_ seconds: Double) -> String { String(format: "%.3f", seconds) }

    private static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date())
    }

    // MARK: - JSON

    /// The JSON report (``JSONReport``): the suite's totals and, per scenario, its verdict, checks
    /// with evidence, the timeline as applied, the origin's request log and the end of the client's output.
    public static func json(_ results: [Result], seconds: Double, shard: ScenarioShard? = nil) -> String {
        JSONReport(
            format: JSONReport.currentFormat,
            passed: results.allSatisfy(\.passed),
            seconds: seconds,
            shard: shard?.description,
            scenarios: results.map(JSONReport.Scenario.init)
        ).text
    }
}
