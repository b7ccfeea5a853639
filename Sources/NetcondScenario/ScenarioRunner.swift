import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NetcondCore
import NetcondOrigin
import NetcondPacket
import NetcondProxy

/// One scenario run: what happened and what the checks made of it.
public struct ScenarioOutcome: Sendable {
    public var scenario: Scenario
    public var seed: UInt64
    public var command: [String]
    public var evidence: RunEvidence
    public var results: [CheckResult]
    /// The timeline as applied: seconds since the client started, and what changed.
    public var applied: [(at: Double, what: String)]
    /// netcond's own start-up: from the start of the run to the client's start, in seconds.
    public var startup: Double
    /// The one-line link summary of the run (``Session/summaryText()``).
    public var linkSummary: String
    /// The end of what the client printed (stdout and stderr), when it was captured.
    public var clientOutput: ClientOutput
    /// Down bytes the link had delivered to the client, every 100 ms of the run (seconds since
    /// the client started, bytes): the report's picture of how the bytes flowed.
    public var delivered: [DeliverySample] = []

    /// Every check passed, and there was one: a run that judged nothing (a scenario built in code
    /// with no checks) passes nothing.
    public var passed: Bool { !self.results.isEmpty && self.results.allSatisfy(\.passed) }

    /// What a report says of a run that judged nothing.
    public static let nothingJudged =
        "no check was judged: the scenario has none, and a run passes only what a check judged"
}

/// Bytes delivered to the client by a moment of the run, and what the down link was then.
public struct DeliverySample: Sendable, Equatable {
    /// Seconds since the client started.
    public var at: Double
    public var bytes: Int64
    /// The down direction's rate, delay and loss in force then (nil: the engine did not say).
    public var link: LinkMoment?
    /// Each route in force then, with what it had carried (empty: none).
    public var routes: [ControlRoute]

    public init(at: Double, bytes: Int64, link: LinkMoment? = nil, routes: [ControlRoute] = []) {
        self.at = at
        self.bytes = bytes
        self.link = link
        self.routes = routes
    }
}

/// A client's captured stdout and stderr.
public struct ClientOutput: Sendable, Equatable {
    /// The last lines of both (as they came), at most ``ClientOutput/tailLimit`` bytes of them.
    public var tail: String
    /// The last lines it wrote to stderr.
    public var stderrTail: String
    /// Kept on disk (with `--keep`), else nil.
    public var path: String?

    public static let tailLimit = 8 * 1024

    public init(tail: String, stderrTail: String = "", path: String? = nil) {
        self.tail = tail
        self.stderrTail = stderrTail
        self.path = path
    }

    /// The last lines of the log at `path`, with the capture's summary.
    static func read(path: String, summary: OutputCapture.Summary, keep: Bool) -> ClientOutput {
        var tail = ""
        if let handle = FileHandle(forReadingAtPath: path) {
            defer { try? handle.close() }
            let size = (try? handle.seekToEnd()) ?? 0
            let start = size > UInt64(Self.tailLimit) ? size - UInt64(Self.tailLimit) : 0
            try? handle.seek(toOffset: start)
            let data = (try? handle.readToEnd()) ?? Data()
            tail = OutputCapture.tailLines(Array(data), truncated: start > 0)
        }
        return ClientOutput(
            tail: tail, stderrTail: summary.stderrTail,
            path: keep ? path : nil)
    }
}

/// How a scenario run is going, for a live status line.
public struct ScenarioProgress: Sendable {
    /// Seconds since the client started.
    public var elapsed: Double
    public var phase: String
    public var bytesDown: Int64
    /// Requests the origin has seen.
    public var requests: Int
}

/// Failures of netcond itself (exit 3), as opposed to the client failing a check (exit 1).
public struct ScenarioRunError: Error, CustomStringConvertible {
    public var description: String
    public var exitCode: Int32
}

/// Runs a scenario: starts the origin (with the scenario's files and faults) and the proxy (with its
/// profile), gives the client a fresh working directory and its variables, plays the timeline,
/// stops the client at its deadline, then runs the checks on what the origin saw and the client left.
public enum ScenarioRunner {
    /// How long a client has after SIGTERM at its deadline before SIGKILL.
    static let termGrace = Span.seconds(Int64(2))
    /// Delivered-bytes samples kept per run (one every 100 ms).
    static let maxDeliverySamples = 6_000

    /// The client command: the one given after `--`, else the scenario's. Exit 2 when neither names one.
    public static func command(for scenario: Scenario, override: [String]) throws(ScenarioRunError) -> [String] {
        if let program = override.first {
            // A program named by a relative path (`-- ./client`) is the one beside the user, where
            // netcond was started (and checked), not one in the client's fresh working directory.
            guard program.contains("/"), !program.hasPrefix("/") else { return override }
            let absolute = (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(program)
            return [absolute] + override.dropFirst()
        }
        guard let command = scenario.client.command else {
            throw ScenarioRunError(
                description:
                    "\(scenario.file): the scenario names no client command; give one after '--' or as client.command",
                exitCode: 2)
        }
        return command
    }

    /// Runs `scenario` with `client`: a program (see ``command(for:override:)``), or a function in
    /// this process (proxy engine only; it reaches the built-in origin through a forward on
    /// loopback, over the same link).
    public static func run(
        _ scenario: Scenario,
        client: ScenarioClient,
        seed: UInt64,
        baseEnvironment: [String: String],
        keepWorkingDirectory: Bool = false,
        echo: OutputEcho = .direct,
        onStart: (@Sendable (ChildProcess) -> Void)? = nil,
        onEvent: (@Sendable (String) -> Void)? = nil,
        onProgress: (@Sendable (ScenarioProgress) -> Void)? = nil,
        engine: RunEngine = .proxy,
        capture: (delivered: String?, dropped: String?) = (nil, nil),
        user: ChildIdentity? = nil,
        guarding: ControlGuard = ControlGuard(),
        tls: (any TLSProvider)?
    ) async throws(ScenarioRunError) -> ScenarioOutcome {
        let began = NIODeadline.now()
        let started = try await Self.startSession(
            scenario, client: client, seed: seed, engine: engine, capture: capture, user: user, guarding: guarding,
            tls: tls)
        let session = started.session
        let setup = try await Self.prepareClient(
            scenario, session: session, baseEnvironment: baseEnvironment, echo: echo)
        let child = try await Self.startClient(
            client, scenario: scenario, session: session, setup: setup, originForward: started.originForward,
            onStart: onStart)
        setup.capture.start()
        let clientStart = NIODeadline.now()
        let watchers = RunWatchers(
            scenario, session: session, child: child, started: clientStart, onEvent: onEvent, onProgress: onProgress)
        let exit = await child.wait()
        let ended = NIODeadline.now()
        // Whatever the client left running in its group (a shell's background jobs) ends with it.
        child.signal(SIGKILL)
        let watched = await watchers.stop()
        let captured = setup.capture.finish(grace: 1)
        let clientOutput = ClientOutput.read(path: setup.outputFile, summary: captured, keep: keepWorkingDirectory)
        if !keepWorkingDirectory { Self.remove(setup.outputFile) }

        var evidence = RunEvidence(
            exit: exit,
            timedOut: watched.timedOut,
            deadline: scenario.client.deadline,
            duration: Double(ended.uptimeNanoseconds - clientStart.uptimeNanoseconds) / 1e9,
            requests: [],
            workingDirectory: setup.clientDir,
            origin: scenario.origin,
            lines: captured.lines.map {
                let at = Double(Int64($0.uptimeNanoseconds) - Int64(clientStart.uptimeNanoseconds)) / 1e9
                return RunEvidence.OutputLine(at: at, stderr: $0.stderr, text: $0.text)
            },
            stderrTail: captured.stderrTail
        )
        evidence.clientUser = user?.uid
        evidence.handovers = watched.handovers
        evidence.linkRoundTrip = scenario.leastRoundTrip
        await Self.addSessionEvidence(session, to: &evidence, clientStart: clientStart, guarding: guarding)
        let results = scenario.checks.map { Checks.evaluate($0, evidence) }
        ScenarioCheckBoard.shared.record(
            ScenarioCheckBoard.Run(
                scenario: scenario.name, checks: results.map { .init(name: $0.name, passed: $0.passed) }))
        let duration = (evidence.duration * 1000).rounded() / 1000
        let delivered =
            watched.delivered
            + [
                DeliverySample(
                    at: duration, bytes: await session.deliveredBytes(), link: await session.linkMoment(),
                    routes: await session.routeStatuses())
            ]
        let linkSummary = await session.summaryText()
        await session.stop()
        if !keepWorkingDirectory { Self.remove(setup.workdir) }
        return ScenarioOutcome(
            scenario: scenario, seed: seed, command: Self.words(of: client), evidence: evidence, results: results,
            applied: watched.applied, startup: Double(clientStart.uptimeNanoseconds - began.uptimeNanoseconds) / 1e9,
            linkSummary: linkSummary, clientOutput: clientOutput, delivered: delivered
        )
    }

    /// What the session recorded of the run, after what the client left running has ended; and
    /// the changes made from outside.
    private static func addSessionEvidence(
        _ session: any RunSession, to evidence: inout RunEvidence, clientStart: NIODeadline, guarding: ControlGuard
    ) async {
        await session.endLeftovers()
        await session.addEvidence(to: &evidence, clientStart: Int64(clientStart.uptimeNanoseconds))
        evidence.interventions = guarding.changes(since: clientStart).map { "at +\(Checks.seconds($0.at)) \($0.what)" }
    }

    /// Why the proxy engine cannot run a scenario: its profile, or one its timeline switches to,
    /// uses what only the packet engine emulates, or (`hasTLS` false) needs a TLS library (nil: it can).
    public static func proxyProblem(_ scenario: Scenario, hasTLS: Bool = true) -> String? {
        if let refusal = scenario.profile.proxyRefusal(hasTLS: hasTLS) { return refusal }
        for event in scenario.timeline {
            if let profile = event.action.profileSwitchedTo, let refusal = profile.proxyRefusal(hasTLS: hasTLS) {
                return refusal
            }
        }
        return nil
    }

    /// What of a scenario the packet engine cannot do (empty: it can run it).
    public static func packetProblems(_ scenario: Scenario) -> [String] {
        var problems = PacketEngine.unsupportedFeatures(scenario.profile).map { "the profile uses \($0)" }
        for event in scenario.timeline {
            switch event.action {
            case .addFault, .removeFault, .clearFaults:
                problems.append(
                    "its timeline changes HTTP faults (they need a proxy that reads HTTP; the origin's own faults work)"
                )
            case .cut(.close):
                problems.append("its timeline cuts with close (the packet engine cuts with resets)")
            case .switchProfile(let profile), .handover(let profile, _):
                problems += PacketEngine.unsupportedFeatures(profile).map {
                    "a profile its timeline switches to uses \($0)"
                }
                if let problem = PacketSession.addressingProblem(run: scenario.profile, switchingTo: profile) {
                    problems.append(problem)
                }
            case .outage, .stall, .cut(.reset), .captive, .route:
                break
            }
        }
        var seen = Set<String>()
        return problems.filter { seen.insert($0).inserted }
    }

    static func command(for action: ScenarioAction) -> ControlCommand {
        switch action {
        case .switchProfile(let profile): return .switchProfile(profile)
        case .outage(let behaviour): return .outage(behaviour)
        case .stall(let direction): return .stall(direction)
        case .addFault(let fault): return .addFault(fault)
        case .clearFaults: return .removeFault(nil)
        case .removeFault(let name): return .removeFaultsNamed(name)
        case .captive(let open): return .captive(open: open)
        case .cut(let mode): return .cut(mode)
        case .route(let name, let change): return .route(name, change)
        case .handover(let profile, let gap): return .handover(profile, gap: gap)
        }
    }

    /// Why `--user` is refused under the proxy engine.
    public static let userNeedsPacketEngine =
        "--user is for the packet engine, which needs root; the proxy engine does not: run netcond as that user"

    static func makeWorkingDirectory(name: String) throws(ScenarioRunError) -> String {
        do {
            return try TemporaryFiles.makeDirectory(kind: name)
        } catch {
            throw ScenarioRunError(description: "cannot create a working directory: \(error.description)", exitCode: 3)
        }
    }

    /// An empty file for the client's output, next to where working directories go.
    static func makeOutputFile(name: String) throws(ScenarioRunError) -> String {
        do {
            return try TemporaryFiles.makeFile(kind: name, suffix: ".log")
        } catch {
            throw ScenarioRunError(
                description: "cannot create a file for the client's output: \(error.description)", exitCode: 3)
        }
    }

    static func remove(_ directory: String) {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

#if canImport(Glibc)
import Glibc
#endif
