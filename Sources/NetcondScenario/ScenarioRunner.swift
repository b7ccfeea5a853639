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
    public static let nothingJudged = "no check was judged: the scenario has none, and a run passes only what a check judged"
}

/// Bytes delivered to the client by a moment of the run, and what the down link was then.
public struct DeliverySample: Sendable, Equatable {
    /// Seconds since the client started.
    public var at: Double
    public var bytes: Int64
    /// The down direction's rate, delay and loss in force then (nil: the engine did not say).
    public var link: LinkMoment?

    public init(at: Double, bytes: Int64, link: LinkMoment? = nil) {
        self.at = at
        self.bytes = bytes
        self.link = link
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
                description: "\(scenario.file): the scenario names no client command; give one after '--' or as client.command",
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
        let session: any RunSession
        var originForward: URL?
        let command: [String]
        switch client {
        case .command(let words): command = words
        case .function: command = ["(in-process client)"]
        }
        switch engine {
        case .proxy:
            if let refusal = Self.proxyProblem(scenario, hasTLS: tls != nil) {
                throw ScenarioRunError(description: "\(scenario.file): \(refusal)", exitCode: 2)
            }
            if user != nil {
                throw ScenarioRunError(description: "\(scenario.file): \(Self.userNeedsPacketEngine)", exitCode: 2)
            }
            do {
                var forwards: [PortForward] = []
                if case .function = client {
                    forwards.append(PortForward(listenHost: "127.0.0.1", listenPort: 0, targetHost: Session.originHost, targetPort: 80))
                }
                let started = try await Session.start(
                    profile: scenario.profile, seed: seed, forwards: forwards, guarding: guarding, originContent: scenario.origin,
                    tls: tls)
                session = started
                if let forward = started.forwardAddresses.first {
                    originForward = URL(string: "http://\(Session.hostPort(forward))")
                }
            } catch {
                throw ScenarioRunError(description: "cannot start: \(error)", exitCode: 3)
            }
        case .packet:
            if case .function = client {
                throw ScenarioRunError(
                    description: "\(scenario.file): an in-process client cannot run under the packet engine (its packets "
                        + "are netcond's own); run it under the proxy engine, or give a command", exitCode: 2)
            }
            let problems = Self.packetProblems(scenario)
            guard problems.isEmpty else {
                throw ScenarioRunError(
                    description: "\(scenario.file): the packet engine cannot run this scenario: "
                        + problems.joined(separator: "; ") + " (use --engine proxy)",
                    exitCode: 2)
            }
            guard let tls else {
                throw ScenarioRunError(
                    description: "\(scenario.file): the packet engine serves the origin's HTTPS and needs a TLS library; this build has none",
                    exitCode: 2)
            }
            do {
                session = try await PacketSession.start(
                    profile: scenario.profile, seed: seed, originContent: scenario.origin, capture: capture, guarding: guarding,
                    identity: user, tls: tls)
            } catch {
                throw ScenarioRunError(description: "cannot start: \(error)", exitCode: 3)
            }
        }
        let workdir: String
        do {
            workdir = try Self.makeWorkingDirectory(name: scenario.name)
        } catch {
            await session.stop()
            throw error
        }
        // The client's own folder: the working folder itself, or (with --user) a folder of that user's
        // inside it, so that the one netcond removes stays root's.
        let (clientDir, problem) = session.clientFolder(in: workdir)
        if let problem {
            await session.stop()
            Self.remove(workdir)
            throw ScenarioRunError(description: problem, exitCode: 3)
        }
        var environment = session.childEnvironment(base: baseEnvironment)
        for (name, value) in scenario.client.environment { environment[name] = value }
        environment["NETCOND_WORKDIR"] = clientDir
        environment["NETCOND_SCENARIO"] = scenario.name
        if let url = scenario.client.url {
            environment["NETCOND_URL"] = url.hasPrefix("/") ? "http://\(Session.originHost)\(url)" : url
        }
        if let output = scenario.client.output {
            environment["NETCOND_OUTPUT"] = (clientDir as NSString).appendingPathComponent(output)
        }

        // The client's output is always captured (the checks read its stderr), and echoed as `echo` says.
        let outputFile: String
        do {
            outputFile = try Self.makeOutputFile(name: scenario.name)
        } catch {
            await session.stop()
            Self.remove(workdir)
            throw error
        }
        let capture: OutputCapture
        do {
            capture = try OutputCapture(path: outputFile, echo: echo)
        } catch {
            await session.stop()
            Self.remove(workdir)
            Self.remove(outputFile)
            throw ScenarioRunError(description: error.description, exitCode: 3)
        }
        let child: any RunningClient
        switch client {
        case .command(let command):
            do {
                let process = try session.spawnClient(
                    command, environment: environment, workingDirectory: scenario.client.directory ?? clientDir,
                    output: (capture.childStdout, capture.childStderr))
                onStart?(process)
                child = process
            } catch {
                capture.start()
                _ = capture.finish(grace: 1)
                await session.stop()
                Self.remove(workdir)
                Self.remove(outputFile)
                throw ScenarioRunError(description: error.description, exitCode: error.exitCode)
            }
        case .function(let function):
            let origin = originForward ?? URL(string: "http://\(Session.originHost)")!
            let url = environment["NETCOND_URL"].flatMap { text -> URL? in
                let prefix = "http://\(Session.originHost)"
                return text.hasPrefix(prefix + "/") ? URL(string: origin.absoluteString + text.dropFirst(prefix.count)) : URL(string: text)
            }
            let context = InProcessClientContext(
                environment: environment, url: url, outputPath: environment["NETCOND_OUTPUT"], workingDirectory: clientDir,
                originURL: origin, output: (dup(capture.childStdout), dup(capture.childStderr)))
            child = InProcessClient(function, context: context)
        }
        capture.start()
        let started = NIODeadline.now()
        let startup = Double(started.uptimeNanoseconds - began.uptimeNanoseconds) / 1e9
        let origin = session.origin
        let driver = TimelineDriver(
            clock: WallClock(started: started),
            marks: { watchesOrigin, watchesLink in
                var marks = TimelineMarks()
                if watchesOrigin {
                    for entry in origin.requestLog.entries where entry.isFinished {
                        marks.finished += 1
                        if let name = OriginFile.name(inPath: entry.path) { marks.finishedFor[.file(name), default: 0] += 1 }
                        if let name = OriginAPI.name(inPath: entry.path) { marks.finishedFor[.api(name), default: 0] += 1 }
                    }
                }
                if watchesLink { marks.delivered = await session.deliveredBytes() }
                return marks
            },
            apply: { action in await session.apply(action) },
            onEvent: onEvent)
        let timeline = Task { await driver.play(scenario.timeline) }
        let timedOut = NIOLockedValueBox(false)
        let deadline = scenario.client.deadline
        let watchdog = Task {
            try? await Task.sleep(nanoseconds: UInt64(deadline.nanoseconds))
            if Task.isCancelled { return }
            timedOut.withLockedValue { $0 = true }
            onEvent?("client still running at its \(formatSeconds(deadline)) deadline: SIGTERM")
            child.signal(SIGTERM)
            try? await Task.sleep(nanoseconds: UInt64(Self.termGrace.nanoseconds))
            if Task.isCancelled { return }
            child.signal(SIGKILL)
        }
        let samples = NIOLockedValueBox<[DeliverySample]>([])
        let sampler = Task {
            // At most 6,000 samples (10 minutes); past that, the run's end is what matters.
            while !Task.isCancelled && samples.withLockedValue({ $0.count }) < Self.maxDeliverySamples {
                let bytes = await session.deliveredBytes()
                let link = await session.linkMoment()
                let at = Double(NIODeadline.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
                samples.withLockedValue { $0.append(DeliverySample(at: (at * 1000).rounded() / 1000, bytes: bytes, link: link)) }
                try? await Task.sleep(nanoseconds: 100_000_000)
            }
        }
        let progress = onProgress.map { onProgress in Task {
            while !Task.isCancelled {
                let progress = await session.progress()
                let elapsed = Double(NIODeadline.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
                onProgress(ScenarioProgress(
                    elapsed: elapsed, phase: progress.phase,
                    bytesDown: progress.bytesDown, requests: session.origin.requestLog.count))
                try? await Task.sleep(nanoseconds: 500_000_000)
            }
        } }
        let exit = await child.wait()
        let ended = NIODeadline.now()
        // Whatever the client left running in its group (a shell's background jobs) ends with it.
        child.signal(SIGKILL)
        watchdog.cancel()
        timeline.cancel()
        progress?.cancel()
        sampler.cancel()
        _ = await sampler.value
        let applied = await timeline.value
        _ = await progress?.value
        let captured = capture.finish(grace: 1)
        let clientOutput = ClientOutput.read(path: outputFile, summary: captured, keep: keepWorkingDirectory)
        if !keepWorkingDirectory { Self.remove(outputFile) }

        let startNanos = Int64(started.uptimeNanoseconds)
        var evidence = RunEvidence(
            exit: exit,
            timedOut: timedOut.withLockedValue { $0 },
            deadline: deadline,
            duration: Double(ended.uptimeNanoseconds - started.uptimeNanoseconds) / 1e9,
            requests: [],
            workingDirectory: clientDir,
            origin: scenario.origin,
            lines: captured.lines.map {
                RunEvidence.OutputLine(at: Double(Int64($0.uptimeNanoseconds) - startNanos) / 1e9, stderr: $0.stderr, text: $0.text)
            },
            stderrTail: captured.stderrTail
        )
        evidence.clientUser = user?.uid
        await session.endLeftovers()
        await session.addEvidence(to: &evidence, clientStart: startNanos)
        evidence.interventions = guarding.changes(since: started).map { "at +\(Checks.seconds($0.at)) \($0.what)" }
        let results = scenario.checks.map { Checks.evaluate($0, evidence) }
        var delivered = samples.withLockedValue { $0 }
        let duration = (evidence.duration * 1000).rounded() / 1000
        delivered.append(DeliverySample(at: duration, bytes: await session.deliveredBytes(), link: await session.linkMoment()))
        let linkSummary = await session.summaryText()
        await session.stop()
        if !keepWorkingDirectory { Self.remove(workdir) }
        return ScenarioOutcome(
            scenario: scenario, seed: seed, command: command, evidence: evidence, results: results,
            applied: applied, startup: startup, linkSummary: linkSummary,
            clientOutput: clientOutput, delivered: delivered
        )
    }

    /// Why the proxy engine cannot run a scenario: its profile, or one its timeline switches to,
    /// uses what only the packet engine emulates, or (`hasTLS` false) needs a TLS library (nil: it can).
    public static func proxyProblem(_ scenario: Scenario, hasTLS: Bool = true) -> String? {
        if let refusal = scenario.profile.proxyRefusal(hasTLS: hasTLS) { return refusal }
        for event in scenario.timeline {
            if case .switchProfile(let profile) = event.action, let refusal = profile.proxyRefusal(hasTLS: hasTLS) {
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
                problems.append("its timeline changes HTTP faults (they need a proxy that reads HTTP; the origin's own faults work)")
            case .cut(.close):
                problems.append("its timeline cuts with close (the packet engine cuts with resets)")
            case .switchProfile(let profile):
                problems += PacketEngine.unsupportedFeatures(profile).map { "a profile its timeline switches to uses \($0)" }
            case .outage, .stall, .cut(.reset), .captive:
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
        }
    }

    /// Why `--user` is refused under the proxy engine.
    public static let userNeedsPacketEngine =
        "--user is for the packet engine, which needs root; the proxy engine does not: run netcond as that user"

    private static func makeWorkingDirectory(name: String) throws(ScenarioRunError) -> String {
        do {
            return try TemporaryFiles.makeDirectory(kind: name)
        } catch {
            throw ScenarioRunError(description: "cannot create a working directory: \(error.description)", exitCode: 3)
        }
    }

    /// An empty file for the client's output, next to where working directories go.
    private static func makeOutputFile(name: String) throws(ScenarioRunError) -> String {
        do {
            return try TemporaryFiles.makeFile(kind: name, suffix: ".log")
        } catch {
            throw ScenarioRunError(description: "cannot create a file for the client's output: \(error.description)", exitCode: 3)
        }
    }

    static func remove(_ directory: String) {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

#if canImport(Glibc)
import Glibc
#endif
