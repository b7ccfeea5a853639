import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NetcondCore
import NetcondOrigin
import NetcondPacket
import NetcondProxy

#if canImport(Glibc)
import Glibc
#endif

/// The steps of a scenario run (`ScenarioRunner.run`): start the engine's session, prepare the
/// client's folder, environment and output, start it, and watch it (the timeline, its deadline,
/// the bytes delivered, its progress) until it ends. A step that fails undoes what the steps
/// before it set up.
extension ScenarioRunner {
    /// The client's command as the report says it.
    static func words(of client: ScenarioClient) -> [String] {
        switch client {
        case .command(let words): return words
        case .function: return ["(in-process client)"]
        }
    }

    /// The engine's session, with (for an in-process client under the proxy engine) the forward on
    /// loopback it reaches the origin through.
    static func startSession(
        _ scenario: Scenario, client: ScenarioClient, seed: UInt64, engine: RunEngine,
        capture: (delivered: String?, dropped: String?), user: ChildIdentity?, guarding: ControlGuard,
        tls: (any TLSProvider)?
    ) async throws(ScenarioRunError) -> (session: any RunSession, originForward: URL?) {
        switch engine {
        case .proxy:
            return try await Self.startProxySession(
                scenario, client: client, seed: seed, user: user, guarding: guarding, tls: tls)
        case .packet:
            let session = try await Self.startPacketSession(
                scenario, client: client, seed: seed, capture: capture, user: user, guarding: guarding, tls: tls)
            return (session, nil)
        }
    }

    private static func startProxySession(
        _ scenario: Scenario, client: ScenarioClient, seed: UInt64, user: ChildIdentity?, guarding: ControlGuard,
        tls: (any TLSProvider)?
    ) async throws(ScenarioRunError) -> (session: any RunSession, originForward: URL?) {
        if let refusal = Self.proxyProblem(scenario, hasTLS: tls != nil) {
            throw ScenarioRunError(description: "\(scenario.file): \(refusal)", exitCode: 2)
        }
        if user != nil {
            throw ScenarioRunError(description: "\(scenario.file): \(Self.userNeedsPacketEngine)", exitCode: 2)
        }
        do {
            var forwards: [PortForward] = []
            if case .function = client {
                forwards.append(
                    PortForward(listenHost: "127.0.0.1", listenPort: 0, targetHost: Session.originHost, targetPort: 80))
            }
            let started = try await Session.start(
                profile: scenario.profile, seed: seed, forwards: forwards, guarding: guarding,
                originContent: scenario.origin, tls: tls)
            let forward = started.forwardAddresses.first.flatMap { URL(string: "http://\(Session.hostPort($0))") }
            return (started, forward)
        } catch {
            throw ScenarioRunError(description: "cannot start: \(error)", exitCode: 3)
        }
    }

    private static func startPacketSession(
        _ scenario: Scenario, client: ScenarioClient, seed: UInt64, capture: (delivered: String?, dropped: String?),
        user: ChildIdentity?, guarding: ControlGuard, tls: (any TLSProvider)?
    ) async throws(ScenarioRunError) -> any RunSession {
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
                description: "\(scenario.file): the packet engine serves the origin's HTTPS and needs a TLS library; "
                    + "this build has none",
                exitCode: 2)
        }
        do {
            return try await PacketSession.start(
                profile: scenario.profile, seed: seed, originContent: scenario.origin, capture: capture,
                guarding: guarding, identity: user, tls: tls)
        } catch {
            throw ScenarioRunError(description: "cannot start: \(error)", exitCode: 3)
        }
    }

    /// What the client runs in and with: the run's working folder, the client's own folder in it,
    /// its environment, and the capture of its output (always: the checks read its stderr; echoed
    /// as `echo` says).
    struct ClientSetup {
        var workdir: String
        var clientDir: String
        var environment: [String: String]
        var outputFile: String
        var capture: OutputCapture
    }

    /// Prepares the client's folder, environment and output capture; on failure, stops the
    /// session and removes what was made.
    static func prepareClient(
        _ scenario: Scenario, session: any RunSession, baseEnvironment: [String: String], echo: OutputEcho
    ) async throws(ScenarioRunError) -> ClientSetup {
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
        let environment = Self.clientEnvironment(
            scenario, session: session, base: baseEnvironment, clientDir: clientDir)
        let outputFile: String
        do {
            outputFile = try Self.makeOutputFile(name: scenario.name)
        } catch {
            await session.stop()
            Self.remove(workdir)
            throw error
        }
        do {
            let capture = try OutputCapture(path: outputFile, echo: echo)
            return ClientSetup(
                workdir: workdir, clientDir: clientDir, environment: environment, outputFile: outputFile,
                capture: capture)
        } catch {
            await session.stop()
            Self.remove(workdir)
            Self.remove(outputFile)
            throw ScenarioRunError(description: error.description, exitCode: 3)
        }
    }

    /// The session's variables (proxy, CA), the scenario's, and `NETCOND_*`.
    static func clientEnvironment(
        _ scenario: Scenario, session: any RunSession, base: [String: String], clientDir: String
    ) -> [String: String] {
        var environment = session.childEnvironment(base: base)
        for (name, value) in scenario.client.environment { environment[name] = value }
        environment["NETCOND_WORKDIR"] = clientDir
        environment["NETCOND_SCENARIO"] = scenario.name
        if let url = scenario.client.url {
            environment["NETCOND_URL"] = url.hasPrefix("/") ? "http://\(Session.originHost)\(url)" : url
        }
        if let output = scenario.client.output {
            environment["NETCOND_OUTPUT"] = (clientDir as NSString).appendingPathComponent(output)
        }
        return environment
    }

    /// Starts the client: a program through the session, or a function in this process; a program
    /// that cannot start stops the session and removes what was made.
    static func startClient(
        _ client: ScenarioClient, scenario: Scenario, session: any RunSession, setup: ClientSetup, originForward: URL?,
        onStart: (@Sendable (ChildProcess) -> Void)?
    ) async throws(ScenarioRunError) -> any RunningClient {
        switch client {
        case .command(let command):
            do {
                let process = try session.spawnClient(
                    command, environment: setup.environment,
                    workingDirectory: scenario.client.directory ?? setup.clientDir,
                    output: (setup.capture.childStdout, setup.capture.childStderr))
                onStart?(process)
                return process
            } catch {
                setup.capture.start()
                _ = setup.capture.finish(grace: 1)
                await session.stop()
                Self.remove(setup.workdir)
                Self.remove(setup.outputFile)
                throw ScenarioRunError(description: error.description, exitCode: error.exitCode)
            }
        case .function(let function):
            let origin = originForward ?? URL(string: "http://\(Session.originHost)")!
            let url = setup.environment["NETCOND_URL"].flatMap { text -> URL? in
                let prefix = "http://\(Session.originHost)"
                return text.hasPrefix(prefix + "/")
                    ? URL(string: origin.absoluteString + text.dropFirst(prefix.count)) : URL(string: text)
            }
            let context = InProcessClientContext(
                environment: setup.environment, url: url, outputPath: setup.environment["NETCOND_OUTPUT"],
                workingDirectory: setup.clientDir, originURL: origin,
                output: (dup(setup.capture.childStdout), dup(setup.capture.childStderr)))
            return InProcessClient(function, context: context)
        }
    }
}

/// What runs beside the client while it runs: the timeline, the watchdog of its deadline (SIGTERM,
/// then SIGKILL after ``ScenarioRunner/termGrace``), the sampler of the bytes delivered (every
/// 100 ms) and the progress reports (every 500 ms).
struct RunWatchers {
    let timeline: Task<[(at: Double, what: String)], Never>
    let watchdog: Task<Void, Never>
    let sampler: Task<Void, Never>
    let progress: Task<Void, Never>?
    let timedOut: NIOLockedValueBox<Bool>
    let samples: NIOLockedValueBox<[DeliverySample]>
    let handovers: NIOLockedValueBox<[RunEvidence.Handover]>

    /// What they saw: the timeline as applied, whether the deadline stopped the client, and the
    /// bytes delivered over time.
    struct Watched {
        var applied: [(at: Double, what: String)]
        var timedOut: Bool
        var delivered: [DeliverySample]
        var handovers: [RunEvidence.Handover] = []
    }

    init(
        _ scenario: Scenario, session: any RunSession, child: any RunningClient, started: NIODeadline,
        onEvent: (@Sendable (String) -> Void)?, onProgress: (@Sendable (ScenarioProgress) -> Void)?
    ) {
        let handovers = NIOLockedValueBox<[RunEvidence.Handover]>([])
        let driver = TimelineDriver(
            clock: WallClock(started: started),
            marks: { watchesOrigin, watchesLink in
                await Self.marks(session: session, watchesOrigin: watchesOrigin, watchesLink: watchesLink)
            },
            apply: { action in
                let note = await session.apply(action)
                // A handover the session did not take (a note says why) stranded nothing to judge.
                if note == nil, case .handover(let profile, let gap) = action {
                    let at = Double(NIODeadline.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
                    handovers.withLockedValue {
                        $0.append(RunEvidence.Handover(at: at, gap: Double(gap.nanoseconds) / 1e9, to: profile.name))
                    }
                }
                return note
            },
            onEvent: onEvent)
        self.handovers = handovers
        let timedOut = NIOLockedValueBox(false)
        let samples = NIOLockedValueBox<[DeliverySample]>([])
        self.timedOut = timedOut
        self.samples = samples
        self.timeline = Task { await driver.play(scenario.timeline) }
        self.watchdog = Self.watchdog(child, deadline: scenario.client.deadline, timedOut: timedOut, onEvent: onEvent)
        self.sampler = Self.sampler(session, started: started, samples: samples)
        self.progress = onProgress.map { Self.progress(session, started: started, onProgress: $0) }
    }

    /// What the timeline's triggers wait on: the origin's finished requests, the link's delivered bytes.
    private static func marks(session: any RunSession, watchesOrigin: Bool, watchesLink: Bool) async -> TimelineMarks {
        var marks = TimelineMarks()
        if watchesOrigin {
            for entry in session.origin.requestLog.entries where entry.isFinished {
                marks.finished += 1
                if let name = OriginFile.name(inPath: entry.path) { marks.finishedFor[.file(name), default: 0] += 1 }
                if let name = OriginAPI.name(inPath: entry.path) { marks.finishedFor[.api(name), default: 0] += 1 }
            }
        }
        if watchesLink { marks.delivered = await session.deliveredBytes() }
        return marks
    }

    private static func watchdog(
        _ child: any RunningClient, deadline: Span, timedOut: NIOLockedValueBox<Bool>,
        onEvent: (@Sendable (String) -> Void)?
    ) -> Task<Void, Never> {
        Task {
            try? await Task.sleep(nanoseconds: UInt64(deadline.nanoseconds))
            if Task.isCancelled { return }
            timedOut.withLockedValue { $0 = true }
            onEvent?("client still running at its \(formatSeconds(deadline)) deadline: SIGTERM")
            child.signal(SIGTERM)
            try? await Task.sleep(nanoseconds: UInt64(ScenarioRunner.termGrace.nanoseconds))
            if Task.isCancelled { return }
            child.signal(SIGKILL)
        }
    }

    private static func sampler(
        _ session: any RunSession, started: NIODeadline, samples: NIOLockedValueBox<[DeliverySample]>
    ) -> Task<Void, Never> {
        Task {
            // At most 6,000 samples (10 minutes); past that, the run's end is what matters.
            while !Task.isCancelled && samples.withLockedValue({ $0.count }) < ScenarioRunner.maxDeliverySamples {
                let bytes = await session.deliveredBytes()
                let link = await session.linkMoment()
                let routes = await session.routeStatuses()
                let at = Double(NIODeadline.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
                let sample = DeliverySample(at: (at * 1000).rounded() / 1000, bytes: bytes, link: link, routes: routes)
                samples.withLockedValue { $0.append(sample) }
                try? await Task.sleep(nanoseconds: 100_000_000)
            }
        }
    }

    private static func progress(
        _ session: any RunSession, started: NIODeadline, onProgress: @escaping @Sendable (ScenarioProgress) -> Void
    ) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                let progress = await session.progress()
                let elapsed = Double(NIODeadline.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
                onProgress(
                    ScenarioProgress(
                        elapsed: elapsed, phase: progress.phase,
                        bytesDown: progress.bytesDown, requests: session.origin.requestLog.count))
                try? await Task.sleep(nanoseconds: 500_000_000)
            }
        }
    }

    /// Stops them all (the client has ended) and returns what they saw.
    func stop() async -> Watched {
        self.watchdog.cancel()
        self.timeline.cancel()
        self.progress?.cancel()
        self.sampler.cancel()
        _ = await self.sampler.value
        let applied = await self.timeline.value
        _ = await self.progress?.value
        let timedOut = self.timedOut.withLockedValue { $0 }
        return Watched(
            applied: applied, timedOut: timedOut, delivered: self.samples.withLockedValue { $0 },
            handovers: self.handovers.withLockedValue { $0 })
    }
}
