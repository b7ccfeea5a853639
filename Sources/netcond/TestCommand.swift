import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NetcondCore
import NetcondScenario
import NetcondTLS

#if canImport(Glibc)
import Glibc
#endif

struct TestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run many scenarios and report a verdict for each (for CI).",
        usage: "netcond test [PATH ...] [--filter TEXT] [--junit FILE] [--json FILE] [options] [-- COMMAND [ARGS ...]]",
        discussion: """
            Runs every scenario the paths name (files, or folders of *.yaml scenario files; default \
            ./Scenarios), one after the other, with the client given after `--` (else each scenario's \
            own). Prints each check with its evidence, and for a failure the end of the client's \
            output and the command that repeats the run. Exit 0 when every scenario passes, 1 when \
            one fails, 2 for a bad file or usage (nothing runs), 3 when netcond could not run one (or its \
            client could not start); 127 (126) when the client after `--` is not found (cannot be \
            executed): nothing runs, and the reports say so.

            Example:
              netcond test Scenarios/ --junit report.xml -- \\
                sh -c 'wget -q -c -O "$NETCOND_OUTPUT" "$NETCOND_URL"'
            """,
    )

    @Argument(help: "Scenario files or folders (default: ./Scenarios).")
    var paths: [String] = []

    /// The client for every scenario: the words after `--`, split off before parsing (see
    /// ``Netcond/main()``) because a command cannot take two variadic positional arguments.
    nonisolated(unsafe) static var passthrough: [String] = []
    var command: [String] { Self.passthrough }

    @Option(name: .long, help: "Run only scenarios whose name contains this text, or matches this glob (repeatable).")
    var filter: [String] = []

    @Option(name: .long, help: "Write a JUnit XML report here (one testcase per scenario).")
    var junit: String?

    @Option(name: .long, help: "Write a JSON report here (checks, evidence, request logs).")
    var json: String?

    @Option(name: .long, help: "Write an HTML report here: one self-contained file with each scenario's timeline.")
    var html: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Run only part I of N (e.g. 2/4): every scenario falls in exactly one part, the same on every machine, parts balanced by the scenarios' deadlines.",
            valueName: "I/N"))
    var shard: String?

    @Flag(name: .long, help: "List the scenarios that would run, and exit.")
    var list = false

    @Flag(name: .long, help: "Stop after the first scenario that does not pass.")
    var failFast = false

    @Flag(
        name: .long,
        help: "Also show the client's output as it comes (it is captured either way; stdin stays /dev/null).")
    var showOutput = false

    @Flag(name: .long, help: "Keep each client's working directory and output (their paths are printed).")
    var keep = false

    @Option(
        name: .long,
        help:
            "proxy or packet: what carries every scenario's traffic (default: each scenario's engine: key, else proxy). packet needs root."
    )
    var engine: Engine?

    @OptionGroup var seed: SeedOption

    @OptionGroup var lowLatency: LowLatencyOption

    @OptionGroup var user: UserOption

    func validate() throws {
        if let shard = self.shard {
            do {
                _ = try ScenarioShard(parsing: shard)
            } catch {
                throw ValidationError(error.description)
            }
        }
        try checkReportFolders([("--junit", self.junit), ("--json", self.json), ("--html", self.html)])
        if self.user.user != nil && self.engine == .proxy {
            throw ValidationError(ScenarioRunner.userNeedsPacketEngine)
        }
        _ = try self.user.resolve()
    }

    func run() async throws {
        if !self.command.isEmpty && !self.list {
            // The same client runs every scenario: one that cannot start is said once, and nothing runs.
            do {
                try ChildProcess.checkStartable(self.command, environment: currentEnvironment())
            } catch {
                try self.reportUnstartableClient(error)
            }
        }
        let scenarios = try self.loadScenarios()
        if self.list {
            Self.printList(scenarios)
            return
        }
        let seed = try self.seed.resolve()
        let identity = try self.user.resolve(warn: true)
        if scenarios.contains(where: { self.runEngine(for: $0.0) == .packet }) {
            self.user.warnIfUncaged()
        }
        let latencyHold = self.lowLatency.hold()
        defer { withExtendedLifetime(latencyHold) {} }

        let status = LiveStatus(live: true)
        let interruption = SuiteInterruption()
        defer { interruption.stop() }

        let began = Date()
        printError("netcond test: \(scenarios.count) scenario\(scenarios.count == 1 ? "" : "s"), seed \(seed)")
        var results: [ScenarioSuite.Result] = []
        for (index, (scenario, command)) in scenarios.enumerated() {
            if interruption.signal != nil { break }
            let counter = "[\(index + 1)/\(scenarios.count)]"
            Self.announce(scenario, counter: counter)
            let result = await self.runOne(
                scenario, command: command, label: "\(counter) \(scenario.name)", seed: seed, identity: identity,
                status: status, interruption: interruption)
            status.finish()
            self.report(result)
            results.append(result)
            if self.failFast && !result.passed { break }
        }
        let seconds = Date().timeIntervalSince(began)
        status.finish()
        try self.writeReports(results, seconds: seconds)
        print("\n" + ScenarioSuite.summaryLine(results, seconds: seconds))
        if results.count < scenarios.count {
            let reason = interruption.signal.map { "interrupted by signal \($0)" } ?? "--fail-fast"
            print("\(scenarios.count - results.count) not run (\(reason))")
        }
        if let signal = interruption.signal { throw ExitCode(128 + signal) }
        throw ExitCode(ScenarioSuite.exitCode(results))
    }

    /// What carries a scenario's traffic: `--engine`, else the scenario's `engine:`, else the proxy.
    private func runEngine(for scenario: Scenario) -> RunEngine {
        self.engine?.runEngine ?? scenario.engine ?? .proxy
    }

    /// `--list`: a line per scenario (name, file, profile, checks), tab-separated.
    private static func printList(_ scenarios: [(Scenario, [String])]) {
        for (scenario, _) in scenarios {
            let file = TerminalText.escaped(scenario.file)
            let checks = scenario.checks.map(\.name).joined(separator: ",")
            print("\(scenario.name)\t\(file)\t\(scenario.profile.name)\t\(checks)")
        }
    }

    /// `▶ [2/5] name — profile lte (file)` and its description.
    private static func announce(_ scenario: Scenario, counter: String) {
        let file = TerminalText.escaped(scenario.file)
        print("\n▶ \(counter) \(scenario.name) — profile \(scenario.profile.name) (\(file))")
        if !scenario.description.isEmpty { print("  \(scenario.description)") }
        fflush(nil)
    }

    /// Runs one scenario of the suite: what netcond could not run, or a signal stopped, is an error.
    private func runOne(
        _ scenario: Scenario, command: [String], label: String, seed: UInt64, identity: ChildIdentity?,
        status: LiveStatus, interruption: SuiteInterruption
    ) async -> ScenarioSuite.Result {
        let showProgress: (@Sendable (ScenarioProgress) -> Void)? =
            status.live ? { @Sendable progress in status.show(scenarioStatusLine(label, progress)) } : nil
        do {
            let outcome = try await ScenarioRunner.run(
                scenario, client: .command(command), seed: seed, baseEnvironment: currentEnvironment(),
                keepWorkingDirectory: self.keep,
                echo: self.showOutput ? .handler { descriptor, bytes in status.passThrough(descriptor, bytes) } : .none,
                onStart: { child in interruption.started(child) },
                onEvent: { line in status.log("  \(line)") },
                onProgress: showProgress,
                engine: self.runEngine(for: scenario),
                user: identity,
                tls: .nioSSL
            )
            interruption.ended()
            if let signal = interruption.signal {
                // Stopped by the user, not judged: the checks would only see the interruption.
                let seconds = String(format: "%.1f", outcome.evidence.duration)
                return .error(scenario, "interrupted by signal \(signal) after \(seconds) s")
            }
            return .ran(outcome)
        } catch {
            interruption.ended()
            return .error(scenario, error.description)
        }
    }

    /// Finds, decodes and filters the scenarios, and resolves each one's client; exit 2 on any error,
    /// before anything runs.
    private func loadScenarios() throws -> [(Scenario, [String])] {
        var problems: [String] = []
        var badFiles: Set<String> = []
        var scenarios: [(Scenario, [String])] = []
        var names: [String: String] = [:]
        for file in try self.scenarioFiles() {
            let scenario: Scenario
            do {
                scenario = try decodingWithNotes { () throws(ConfigError) in
                    try ScenarioDecoder.decodeFile(atPath: file)
                }
            } catch {
                // Every error of the file, one line each, in file order.
                problems.append(contentsOf: error.all.map(\.oneLine))
                badFiles.insert(file)
                continue
            }
            if let other = names[scenario.name] {
                problems.append(
                    "\(file): scenario name '\(scenario.name)' is also the name of \(other); names must be unique in a run"
                )
                badFiles.insert(file)
                continue
            }
            names[scenario.name] = file
            guard ScenarioSuite.matches(scenario.name, patterns: self.filter) else { continue }
            let client = self.client(of: scenario, file: file)
            if let command = client.command { scenarios.append((scenario, command)) }
            if !client.problems.isEmpty {
                problems += client.problems
                badFiles.insert(file)
            }
        }
        if !problems.isEmpty {
            for problem in problems { printError("netcond: \(TerminalText.escaped(problem))") }
            printError(
                "netcond: \(badFiles.count) scenario file\(badFiles.count == 1 ? "" : "s") cannot be used; nothing was run"
            )
            throw ExitCode(2)
        }
        if scenarios.isEmpty {
            printError(
                TerminalText.escaped(
                    "netcond: no scenario matches --filter \(self.filter.joined(separator: ", ")); "
                        + "the names are: \(names.keys.sorted().joined(separator: ", "))"))
            throw ExitCode(2)
        }
        if let shard = self.parsedShard {
            // Every file was checked above, whichever part it falls in: a bad file fails every part.
            let all = scenarios.count
            scenarios = shard.select(scenarios, name: { $0.0.name }, weight: { $0.0.client.deadline.seconds })
            printError("netcond test: part \(shard) holds \(scenarios.count) of \(all) scenario\(all == 1 ? "" : "s")")
        }
        return scenarios
    }

    /// The scenario files the paths name (default ./Scenarios); exit 2 when they name none.
    private func scenarioFiles() throws -> [String] {
        var paths = self.paths
        if paths.isEmpty {
            guard FileManager.default.fileExists(atPath: "Scenarios") else {
                throw ValidationError(
                    "no scenario paths given and no ./Scenarios folder here (usage: netcond test PATH... [-- COMMAND])")
            }
            paths = ["Scenarios"]
        }
        do {
            let found = try ScenarioSuite.discover(paths)
            if !found.skipped.isEmpty && !self.list {
                let skipped = TerminalText.escaped(found.skipped.joined(separator: ", "))
                printError("netcond test: not scenarios (no checks: or client:), skipped: \(skipped)")
            }
            return found.files
        } catch {
            printError("netcond: \(TerminalText.escaped(error.description))")
            throw ExitCode(2)
        }
    }

    /// The client that runs a scenario (nil when there is none), and why the scenario cannot be run
    /// as asked: no client, or an engine that cannot carry it. With `--list`, whatever names one.
    private func client(of scenario: Scenario, file: String) -> (command: [String]?, problems: [String]) {
        if self.list {
            return (self.command.isEmpty ? scenario.client.command ?? [] : self.command, [])
        }
        var problems: [String] = []
        var command: [String]?
        do {
            command = try ScenarioRunner.command(for: scenario, override: self.command)
        } catch {
            problems.append(error.description)
        }
        let engine = self.runEngine(for: scenario)
        if engine == .proxy, let refusal = ScenarioRunner.proxyProblem(scenario) {
            problems.append("\(file): \(refusal)")
        }
        if engine == .packet {
            let unsupported = ScenarioRunner.packetProblems(scenario)
            if !unsupported.isEmpty {
                problems.append(
                    "\(file): the packet engine cannot run it: " + unsupported.joined(separator: "; ")
                        + " (run it with --engine proxy, or leave it out of the paths given)")
            }
        }
        return (command, problems)
    }

    private var parsedShard: ScenarioShard? { self.shard.flatMap { try? ScenarioShard(parsing: $0) } }

    /// The client after `--` cannot start (127: not found, 126: not executable): said once, and the
    /// reports (when asked for) have an error for each scenario saying so, so that CI finds them.
    /// What is wrong with the files, if anything, is said too; the exit code is the client's.
    private func reportUnstartableClient(_ error: ChildProcessError) throws -> Never {
        printError("netcond: \(error.description)")
        let reports = self.junit != nil || self.json != nil
        do {
            let scenarios = try self.loadScenarios()
            let message = "the client could not start: \(error.description)"
            try self.writeReports(scenarios.map { .error($0.0, message) }, seconds: 0)
        } catch let exit as ExitCode {
            // 2: the files' problems were said; 3: the report that could not be written was.
            if exit.rawValue == 2 && reports { printError("netcond: no report written: the scenarios cannot be used") }
        } catch {
            printError("netcond: \(reports ? "no report written: " : "")\(error)")
        }
        throw ExitCode(error.exitCode)
    }

    private func report(_ result: ScenarioSuite.Result) {
        switch result {
        case .error(_, let message):
            print("  ! netcond could not run it: \(TerminalText.escaped(message))")
        case .ran(let outcome):
            for line in ScenarioReport.checkLines(outcome) { print("  " + line) }
            if !outcome.passed {
                if !outcome.clientOutput.tail.isEmpty {
                    let lines = outcome.clientOutput.tail.split(separator: "\n", omittingEmptySubsequences: false)
                        .map(String.init).reversed().drop { $0.isEmpty }.reversed()
                    let shown = Array(lines.suffix(12))
                    print("  client output (last \(shown.count) of \(lines.count) lines shown):")
                    // What the client printed, replayed: its control characters written out, so an
                    // ESC, BEL or NUL in its output cannot drive the terminal or the CI log.
                    for line in shown { print("  │ " + TerminalText.escaped(line)) }
                }
                print("  " + ScenarioReport.repeatLine(outcome, scenarioArgument: outcome.scenario.file))
            }
            if self.keep {
                print("  working directory kept: \(outcome.evidence.workingDirectory)")
                if let path = outcome.clientOutput.path { print("  client output kept: \(path)") }
            }
            let verdict = outcome.passed ? "✓ passed" : "✗ FAILED"
            print(
                "\(verdict) \(outcome.scenario.name) — client ran \(String(format: "%.1f", outcome.evidence.duration)) s; \(outcome.linkSummary)"
            )
        }
        fflush(nil)
    }

    private func writeReports(_ results: [ScenarioSuite.Result], seconds: Double) throws {
        let shard = self.parsedShard
        let json = ScenarioSuite.json(results, seconds: seconds, shard: shard)
        try netcond.writeReports([
            (self.junit, { ScenarioSuite.junit(results, seconds: seconds, shard: shard) }),
            (self.json, { json }),
            (self.html, { htmlReport(json) }),
        ])
    }
}

/// A signal stops the whole run: the client gets it (SIGKILL 2 s later if it is still there) and
/// no further scenario starts.
final class SuiteInterruption: Sendable {
    private let current = NIOLockedValueBox<ChildProcess?>(nil)
    private let interrupted = NIOLockedValueBox<Int32?>(nil)
    private let signals = SignalForwarder()

    init() {
        let current = self.current, interrupted = self.interrupted
        self.signals.onSignal { signal in
            interrupted.withLockedValue { $0 = $0 ?? signal }
            if let child = current.withLockedValue({ $0 }) {
                Self.stop(child, current: current, interrupted: interrupted)
            }
        }
    }

    /// The signal that stopped the run, if one did.
    var signal: Int32? { self.interrupted.withLockedValue { $0 } }

    /// A scenario's client started: a signal goes to it (at once, when one came before).
    func started(_ child: ChildProcess) {
        self.current.withLockedValue { $0 = child }
        Self.stop(child, current: self.current, interrupted: self.interrupted)
    }

    /// The scenario's client ended.
    func ended() {
        self.current.withLockedValue { $0 = nil }
    }

    /// Signals are no longer caught.
    func stop() {
        self.signals.stop()
    }

    private static func stop(
        _ child: ChildProcess, current: NIOLockedValueBox<ChildProcess?>, interrupted: NIOLockedValueBox<Int32?>
    ) {
        guard let signal = interrupted.withLockedValue({ $0 }) else { return }
        child.signal(signal)
        DispatchQueue.global().asyncAfter(deadline: .now() + 2) {
            if current.withLockedValue({ $0 === child }) { child.signal(SIGKILL) }
        }
    }
}
