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
                throw DiscoveryError(description: "\(path): no such file or directory; give scenario files or folders of them")
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
        if !failed.isEmpty { parts.append("\(failed.count) failed (\(failed.map(\.scenario.name).joined(separator: ", ")))") }
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
        xml += "<testsuites name=\"netcond\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"\(errors)\" time=\"\(Self.time(seconds))\">\n"
        let suite = shard.map { "netcond scenarios (part \($0.index) of \($0.count))" } ?? "netcond scenarios"
        xml += "  <testsuite name=\"\(suite)\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"\(errors)\" skipped=\"0\" time=\"\(Self.time(seconds))\" timestamp=\"\(Self.timestamp())\">\n"
        for result in results {
            let scenario = result.scenario
            let folder = ((scenario.file as NSString).deletingLastPathComponent as NSString).lastPathComponent
            let classname = "netcond." + (folder.isEmpty ? "scenarios" : folder)
            let time: Double
            if case .ran(let outcome) = result { time = outcome.evidence.duration } else { time = 0 }
            xml += "    <testcase classname=\"\(Self.escape(classname))\" name=\"\(Self.escape(scenario.name))\" file=\"\(Self.escape(scenario.file))\" time=\"\(Self.time(time))\">\n"
            switch result {
            case .ran(let outcome):
                let lines = ScenarioReport.checkLines(outcome)
                if !outcome.passed {
                    let first = outcome.results.first { !$0.passed }
                    let (type, message) = first.map { ($0.name, "\($0.name): \($0.evidence)") } ?? ("no-checks", ScenarioOutcome.nothingJudged)
                    var text = lines.joined(separator: "\n")
                    text += "\n" + ScenarioReport.repeatLine(outcome, scenarioArgument: scenario.file)
                    xml += "      <failure type=\"\(Self.escape(type))\" message=\"\(Self.escape(message))\">\(Self.escape(text))</failure>\n"
                }
                var out = [ScenarioReport.header(
                    scenario, seed: outcome.seed, command: outcome.command,
                    engine: outcome.evidence.engine == .packet ? .packet : .proxy)]
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

    /// The JSON report: the suite's totals and, per scenario, its verdict, checks with evidence,
    /// the timeline as applied, the origin's request log and the end of the client's output.
    public static func json(_ results: [Result], seconds: Double, shard: ScenarioShard? = nil) -> String {
        let report = JSONReport(
            format: JSONReport.currentFormat,
            passed: results.allSatisfy(\.passed),
            seconds: seconds,
            shard: shard?.description,
            scenarios: results.map(JSONReport.Scenario.init)
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(report)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    struct JSONReport: Encodable {
        /// The report's shape: a reader refuses another (``ReportMerge``).
        var format: Int
        /// 2: the run's picture too (delivered bytes over time, output lines with their times,
        /// failed connection attempts, when each request ended, each check's marks).
        static let currentFormat = 2
        var passed: Bool
        var seconds: Double
        /// `I/N` for a part of a sharded run; absent otherwise.
        var shard: String?
        var scenarios: [Scenario]

        struct Scenario: Encodable {
            var name: String
            var file: String
            var profile: String
            /// proxy or packet, when it ran
            var engine: String?
            /// which TCP sender the servers used
            var sender: String?
            /// passed, failed or error
            var verdict: String
            var error: String?
            var seed: UInt64?
            var command: [String]?
            var exit: String?
            var timedOut: Bool?
            var seconds: Double?
            var startupSeconds: Double?
            var checks: [Check]?
            var timeline: [Applied]?
            var requests: [Request]?
            var clientOutput: String?
            /// The client's deadline, seconds.
            var deadline: Double?
            /// [seconds since the client started, bytes delivered to it], every 100 ms.
            var delivered: [[Double]]?
            /// The down link as it moved: [seconds since the client started, rate in bits per second
            /// (null: unlimited), one-way delay in ms, loss probability], each time it changed (sampled
            /// every 100 ms) and at the end.
            var link: [[Double?]]?
            /// The client's output lines as they came (at most the last 2,000, each at most 500 characters).
            var output: [Line]?
            /// Connection attempts that never reached a server.
            var attempts: [Attempt]?
            /// What the link recorded of itself (state changes, faults applied, the portal), at most 2,000.
            var events: [Event]?

            struct Event: Encodable {
                var at: Double
                var kind: String
                var detail: String
            }

            struct Line: Encodable {
                var at: Double
                var stderr: Bool
                var text: String
            }

            struct Attempt: Encodable {
                var at: Double
                var host: String
                var port: Int
                var outcome: String
            }

            struct Check: Encodable {
                var name: String
                var passed: Bool
                var evidence: String
                var details: [String]
                /// Why the verdict may not hold on a real network (absent when it does).
                var caveat: String?
                /// The moments (seconds) the verdict rests on.
                var marks: [Double]
            }

            struct Applied: Encodable {
                var at: Double
                var what: String
            }

            struct Request: Encodable {
                var at: Double
                var method: String
                var path: String
                var range: String?
                var idempotencyKey: String?
                var status: Int?
                var retryAfter: String?
                var bodyBytes: Int64
                var completed: Bool
                /// When the origin wrote the response head (seconds), when it did: the request
                /// waited on the server until then.
                var responded: Double?
                /// When the response ended (seconds), when it did.
                var ended: Double?
                /// When its last byte reached the client (seconds), when known.
                var received: Double?
                /// The response ended before its whole body (a cut, a fault); absent otherwise.
                var cutShort: Bool?
                /// Body bytes that reached the client, when fewer than the origin sent.
                var bodyBytesReceived: Int64?
                /// The rest was still on its way when the run ended (the client stopped at its deadline).
                var stoppedByRunEnd: Bool?
                var linkCut: String?
            }

            /// The down link's samples where it changed, and the last: a fixed link is two rows.
            static func linkSamples(_ samples: [DeliverySample]) -> [[Double?]]? {
                var rows: [[Double?]] = []
                var last: [Double?]?
                for (index, sample) in samples.enumerated() {
                    guard let link = sample.link else { continue }
                    let values: [Double?] = [
                        link.rate.map { Double($0.bitsPerSecond) }, (Double(link.delay.nanoseconds) / 1e3).rounded() / 1e3,
                        (link.loss * 1e6).rounded() / 1e6,
                    ]
                    if values != last || index == samples.count - 1 { rows.append([sample.at] + values) }
                    last = values
                }
                return rows.isEmpty ? nil : rows
            }

            init(_ result: ScenarioSuite.Result) {
                let scenario = result.scenario
                self.name = scenario.name
                self.file = scenario.file
                self.profile = scenario.profile.name
                switch result {
                case .error(_, let message):
                    self.verdict = "error"
                    self.error = message
                case .ran(let outcome):
                    self.verdict = outcome.passed ? "passed" : "failed"
                    self.engine = outcome.evidence.engine == .packet ? "packet" : "proxy"
                    self.sender = outcome.evidence.sender
                    self.seed = outcome.seed
                    self.command = outcome.command
                    self.exit = outcome.evidence.exit.map(Checks.describe)
                    self.timedOut = outcome.evidence.timedOut
                    self.seconds = (outcome.evidence.duration * 1000).rounded() / 1000
                    self.startupSeconds = (outcome.startup * 1000).rounded() / 1000
                    self.checks = outcome.results.map {
                        Check(name: $0.name, passed: $0.passed, evidence: $0.evidence, details: $0.details, caveat: $0.caveat, marks: $0.marks)
                    }
                    self.timeline = outcome.applied.map { Applied(at: ($0.at * 1000).rounded() / 1000, what: $0.what) }
                    self.requests = outcome.evidence.requests.map {
                        Request(at: ($0.at * 1000).rounded() / 1000, method: $0.method, path: $0.path, range: $0.range,
                                idempotencyKey: $0.idempotencyKey, status: $0.status, retryAfter: $0.retryAfter,
                                bodyBytes: $0.bodyBytesSent, completed: $0.completed,
                                responded: $0.responded.map { ($0 * 1000).rounded() / 1000 },
                                ended: $0.ended.map { ($0 * 1000).rounded() / 1000 },
                                received: $0.received.map { ($0 * 1000).rounded() / 1000 },
                                cutShort: $0.cutShort ? true : nil,
                                bodyBytesReceived: $0.undelivered > 0 ? $0.bodyBytesReceived : nil,
                                stoppedByRunEnd: $0.stoppedByRunEnd && $0.undelivered > 0 ? true : nil, linkCut: $0.linkCut?.rawValue)
                    }
                    self.clientOutput = outcome.clientOutput.tail
                    self.deadline = outcome.evidence.deadline.seconds
                    self.delivered = outcome.delivered.map { [$0.at, Double($0.bytes)] }
                    self.link = Self.linkSamples(outcome.delivered)
                    self.output = outcome.evidence.lines.suffix(2_000).map {
                        Line(at: ($0.at * 1000).rounded() / 1000, stderr: $0.stderr, text: String($0.text.prefix(500)))
                    }
                    self.events = outcome.evidence.linkEvents.prefix(2_000).map {
                        Event(at: ($0.at * 1000).rounded() / 1000, kind: $0.kind, detail: $0.detail)
                    }
                    self.attempts = outcome.evidence.failedConnects.map {
                        Attempt(at: ($0.at * 1000).rounded() / 1000, host: $0.host, port: $0.port, outcome: $0.outcome.rawValue)
                    }
                }
            }
        }
    }
}
