import ArgumentParser
import Dispatch
import NetcondCore
import NetcondPacket
import NetcondProxy
import NetcondScenario
import NetcondTLS

#if canImport(Glibc)
import Glibc
#endif

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a program under a profile's conditions.",
        discussion: """
            Starts the proxy on a free loopback port and the built-in origin (http://origin.netcond.test), \
            gives the program HTTP_PROXY / HTTPS_PROXY / ALL_PROXY (and lower-case twins, NO_PROXY emptied), \
            and exits with its exit code (128+N when it was killed by signal N). The program runs in a \
            process group of its own, which has the terminal while it runs; SIGINT / SIGTERM / SIGHUP / \
            SIGQUIT sent to netcond are passed on to the group, and a group still there 5 s later is killed. \
            Whatever the program leaves running in its group ends with it. A summary line goes to stderr at the end.
            """
    )

    @Argument(
        help: "A built-in profile name (see `netcond profiles`) or a profile YAML file.", completion: profileCompletion)
    var profile: String

    @Argument(parsing: .postTerminator, help: "The program and its arguments, after `--`.")
    var command: [String] = []

    @OptionGroup var seed: SeedOption

    @OptionGroup var lowLatency: LowLatencyOption

    @OptionGroup var user: UserOption

    @Option(
        name: .long,
        help: """
            proxy: the program reaches the network through netcond's proxy (its proxy variables are set;             no privilege needed). packet: every packet of the program and its children crosses the link             (TCP, UDP, ICMP; IPv4 and IPv6), whether it honours proxy variables or not; needs root or CAP_NET_ADMIN.
            """
    )
    var engine: Engine?

    @Option(
        name: .long,
        help: "--engine packet: write every packet the link delivered, both ways, to FILE (pcap; tcpdump -r reads it).")
    var pcap: String?

    @Option(
        name: .customLong("pcap-drops"), help: "--engine packet: write every packet the link dropped to FILE (pcap).")
    var pcapDrops: String?

    @Option(name: .long, help: "Also forward LISTEN=TARGET ([host:]port=host:port), for programs that ignore proxies.")
    var forward: [String] = []

    @Flag(name: .long, help: "Do not print the summary line or the link's state changes.")
    var quiet = false

    @Flag(name: .long, help: "Scenario runs: keep the client's working directory (its path is printed).")
    var keep = false

    @Option(name: .long, help: "Scenario runs: write the JSON report here (as netcond test --json).")
    var json: String?

    @Option(name: .long, help: "Scenario runs: write the HTML report here (its timeline, checks and evidence).")
    var html: String?

    /// The scenario this run names, when the argument is a scenario file rather than a profile.
    private var scenarioPath: String? {
        guard ProfileCatalog.looksLikePath(self.profile), ScenarioDecoder.isScenarioFile(atPath: self.profile) else {
            return nil
        }
        return self.profile
    }

    static let pcapNeedsPacketEngine =
        "--pcap and --pcap-drops record the packets of the packet engine; add --engine packet "
        + "(the proxy engine carries streams, not packets)"

    func validate() throws {
        if self.command.isEmpty && self.scenarioPath == nil {
            throw ValidationError("no command given after '--' (usage: netcond run PROFILE -- COMMAND [ARGS...])")
        }
        if (self.json != nil || self.html != nil) && self.scenarioPath == nil {
            throw ValidationError(
                "--json and --html report a scenario's checks; give a scenario file (a profile run has none)")
        }
        try checkReportFolders([("--json", self.json), ("--html", self.html)])
        _ = try self.forward.map(parseForward)
        // A scenario may ask for the packet engine itself (engine: packet): checked once it is read.
        if (self.pcap != nil || self.pcapDrops != nil) && self.engine != .packet && self.scenarioPath == nil {
            throw ValidationError(Self.pcapNeedsPacketEngine)
        }
        // A scenario may ask for the packet engine itself: --user is checked again once it is read.
        if self.user.user != nil && self.engine != .packet && self.scenarioPath == nil {
            throw ValidationError(ScenarioRunner.userNeedsPacketEngine)
        }
        _ = try self.user.resolve()
        if self.engine == .packet {
            if !self.forward.isEmpty {
                throw ValidationError(
                    "--forward is for programs that ignore proxies; under --engine packet every packet of the "
                        + "program crosses the link already: drop --forward")
            }
        }
    }

    func run() async throws {
        if let scenarioPath = self.scenarioPath {
            try await self.runScenario(scenarioPath)
            return
        }
        let profile = resolveProfile(self.profile)
        if (self.engine ?? .proxy) == .packet {
            try await self.runPacketEngine(profile)
            return
        }
        if let refusal = profile.streamEngineRefusal {
            printError("netcond: \(refusal)")
            throw ExitCode(2)
        }
        let seed = try self.seed.resolve()
        let latencyHold = self.lowLatency.hold()
        defer { withExtendedLifetime(latencyHold) {} }
        let forwards = try self.forward.map(parseForward)
        let session: Session
        // The child owns the terminal: state changes (schedule phases, live outages) are log lines only.
        let stateLog = LiveStatus(live: false)
        let quiet = self.quiet
        do {
            session = try await Session.start(profile: profile, seed: seed, forwards: forwards, tls: .nioSSL) {
                state, at in
                if !quiet { stateLog.stateChanged(state, at: at) }
            }
        } catch {
            printError("netcond: \(error)")
            throw ExitCode(3)
        }
        if let warning = session.trust?.warning, !quiet { printError(warning) }
        // On a terminal, where a person can open it: the live dashboard.
        if let controlURL = session.controlURL, !quiet, isatty(2) != 0 {
            printError("netcond: dashboard on \(controlURL)/ (live graphs and controls)")
        }
        let environment = session.childEnvironment(base: currentEnvironment())
        let status = try await self.runCommand { () throws(ChildProcessError) in
            try ChildProcess.spawn(self.command, environment: environment)
        } cleanUp: {
            await session.stop()
        }
        if !self.quiet {
            printError(await session.summaryLine(named: profileLabel(self.profile, profile)))
            if await session.summary().connections == 0 && forwards.isEmpty {
                // Nothing crossed the link: the verdict of such a run is about no conditions.
                printError(
                    "netcond: no connection went through netcond: the command may ignore the proxy variables "
                        + "(http_proxy, https_proxy; Node's fetch, Go and Java programs often do) or may not have made any; "
                        + "--engine packet (as root) takes a program's own packets through the link whatever it does, "
                        + "and --forward LISTEN=HOST:PORT gives a program that takes an address a port to use")
            }
        }
        await session.stop()
        throw ExitCode(status.shellCode)
    }
}

extension RunCommand {
    /// Starts the command (`spawn`), passes netcond's signals on to its group, and waits for it to
    /// end. When it cannot start, `cleanUp` runs and netcond exits as a shell would (127, 126).
    func runCommand(
        _ spawn: () throws(ChildProcessError) -> ChildProcess, cleanUp: () async -> Void
    ) async throws -> ExitStatus {
        let signals = SignalForwarder()
        let child: ChildProcess
        do {
            child = try spawn()
        } catch {
            await cleanUp()
            printError("netcond: \(error.description)")
            throw ExitCode(error.exitCode)
        }
        signals.forward(to: child) { signal in
            let program = TerminalText.escaped(self.command[0])
            printError(
                "netcond: \(program) still running \(Int(SignalForwarder.killGrace)) s after "
                    + "\(signalName(signal)): killed (SIGKILL to its process group)")
        }
        let status = await child.wait()
        signals.stop()
        return status
    }
}

/// How conditions reach the program: `--engine proxy|packet`.
enum Engine: String, ExpressibleByArgument, CaseIterable {
    case proxy
    case packet

    var runEngine: RunEngine { self == .packet ? .packet : .proxy }
}

extension RunCommand {
    /// `netcond run --engine packet PROFILE -- COMMAND`: the command in the packet engine's cgroup,
    /// every packet of it through the link; exits with its exit code.
    func runPacketEngine(_ profile: Profile) async throws {
        let unsupported = PacketEngine.unsupportedFeatures(profile)
        if !unsupported.isEmpty {
            printError(
                "netcond: profile \(profile.name) uses " + unsupported.joined(separator: ", ")
                    + ", which the packet engine does not emulate yet; run it with --engine proxy")
            throw ExitCode(2)
        }
        let seed = try self.seed.resolve()
        let latencyHold = self.lowLatency.hold()
        defer { withExtendedLifetime(latencyHold) {} }
        do {
            try ChildProcess.checkStartable(self.command, environment: currentEnvironment())
        } catch {
            printError("netcond: \(error.description)")
            throw ExitCode(error.exitCode)
        }
        let identity = try self.user.resolve(warn: true)
        if !self.quiet { self.user.warnIfUncaged() }
        // The child owns the terminal: state changes (schedule phases, stalls) are log lines only.
        let stateLog = LiveStatus(live: false)
        let quiet = self.quiet
        let session: PacketSession
        do {
            session = try await PacketSession.start(
                profile: profile, seed: seed, capture: (self.pcap, self.pcapDrops), precise: self.lowLatency.lowLatency,
                identity: identity, tls: .nioSSL
            ) { state, at in
                if !quiet { stateLog.stateChanged(state, at: at) }
            }
        } catch {
            printError("netcond: \(error.description)")
            throw ExitCode(3)
        }
        if let warning = session.trust.warning, !quiet { printError(warning) }
        // Live control (`netcond ctl`, NETCOND_CONTROL) is the session's, as in proxy mode.
        let environment = session.childEnvironment(base: currentEnvironment())
        let status = try await self.runCommand { () throws(ChildProcessError) in
            try session.spawn(self.command, environment: environment)
        } cleanUp: {
            await session.stop()
        }
        let breaches = session.breaches()
        await session.stop()
        if !self.quiet {
            printError(
                "netcond: "
                    + packetSummaryText(
                        profile: profileLabel(self.profile, profile), seed: seed, session.summary(),
                        sender: session.sender))
            if let radio = await session.radioLine() { printError(radio) }
        }
        // Said even with --quiet: the conditions did not hold, whatever the command's exit says.
        for breach in breaches {
            printError(
                "netcond: at +\(String(format: "%.2f", breach.at)) s, \(breach.description); the profile's conditions "
                    + "did not hold for the command (--user prevents it)")
        }
        throw ExitCode(status.shellCode)
    }
}

extension RunCommand {
    /// `netcond run SCENARIO.yaml [-- COMMAND]`: exit 0 when every check passes, 1 when one fails,
    /// 2 for a bad file or usage, 3 when netcond could not run.
    func runScenario(_ path: String) async throws {
        let scenario: Scenario
        do {
            scenario = try decodingWithNotes { () throws(ConfigError) in try ScenarioDecoder.decodeFile(atPath: path) }
        } catch {
            printError("netcond: \(error.description)")
            throw ExitCode(2)
        }
        let seed = try self.seed.resolve()
        let latencyHold = self.lowLatency.hold()
        defer { withExtendedLifetime(latencyHold) {} }
        let command: [String]
        do {
            command = try ScenarioRunner.command(for: scenario, override: self.command)
        } catch {
            printError("netcond: \(error.description)")
            throw ExitCode(error.exitCode)
        }
        let engine = self.engine?.runEngine ?? scenario.engine ?? .proxy
        let identity = try self.user.resolve(warn: true)
        if (self.pcap != nil || self.pcapDrops != nil) && engine != .packet {
            printError("netcond: \(Self.pcapNeedsPacketEngine)")
            throw ExitCode(2)
        }
        printError(ScenarioReport.header(scenario, seed: seed, command: command, engine: engine))
        if engine == .packet && !self.quiet { self.user.warnIfUncaged() }
        let outcome = try await self.runOutcome(
            scenario, command: command, seed: seed, engine: engine, identity: identity)
        if !self.quiet { printError("netcond: " + outcome.linkSummary) }
        if self.keep {
            printError("netcond: working directory kept: \(outcome.evidence.workingDirectory)")
            if let path = outcome.clientOutput.path { printError("netcond: client output kept: \(path)") }
        }
        for line in ScenarioReport.checkLines(outcome) { print(line) }
        printError(ScenarioReport.verdictLine(outcome, scenarioArgument: path))
        if self.json != nil || self.html != nil {
            try self.writeScenarioReports(outcome, engine: engine)
        }
        throw ExitCode(outcome.passed ? 0 : 1)
    }

    /// Runs the scenario with its client, signals passed on to it, a status line on a terminal;
    /// netcond's own failure is said, and is the exit code.
    private func runOutcome(
        _ scenario: Scenario, command: [String], seed: UInt64, engine: RunEngine, identity: ChildIdentity?
    ) async throws -> ScenarioOutcome {
        let signals = SignalForwarder()
        let quiet = self.quiet
        // On a terminal, a status line below the client's own output (which passes around it).
        let status = LiveStatus(live: !quiet)
        let name = scenario.name
        let showProgress: (@Sendable (ScenarioProgress) -> Void)? =
            status.live ? { @Sendable progress in status.show(scenarioStatusLine(name, progress)) } : nil
        let outcome: ScenarioOutcome
        do {
            outcome = try await ScenarioRunner.run(
                scenario, client: .command(command), seed: seed, baseEnvironment: currentEnvironment(),
                keepWorkingDirectory: self.keep,
                echo: status.live ? .handler { descriptor, bytes in status.passThrough(descriptor, bytes) } : .direct,
                onStart: { child in
                    signals.forward(to: child) { signal in
                        printError(
                            "netcond: the client was still running \(Int(SignalForwarder.killGrace)) s after "
                                + "\(signalName(signal)): killed (SIGKILL to its process group)")
                    }
                },
                onEvent: { line in if !quiet { status.log("netcond: \(line)") } },
                onProgress: showProgress,
                engine: engine,
                capture: (self.pcap, self.pcapDrops),
                user: identity,
                guarding: ControlGuard { url, token in
                    // A person at the terminal may change the conditions; the client's environment never holds the token.
                    if !quiet {
                        status.log(
                            "netcond: the client cannot change this scenario's conditions; you can, and every verdict "
                                + "then says so: netcond ctl --control \(url) --token \(token) …")
                    }
                },
                tls: .nioSSL
            )
        } catch {
            status.finish()
            signals.stop()
            printError("netcond: \(error.description)")
            throw ExitCode(error.exitCode)
        }
        status.finish()
        signals.stop()
        return outcome
    }

    /// `--json` and `--html`: the run's report; a packet-engine run's capture drawn after the scenario.
    private func writeScenarioReports(_ outcome: ScenarioOutcome, engine: RunEngine) throws {
        let json = ScenarioSuite.json([.ran(outcome)], seconds: outcome.evidence.duration)
        var connections: (graph: TimeSequence, capture: String, dropsKnown: Bool)?
        if self.html != nil, engine == .packet, let capture = self.pcap {
            do {
                let graph = try TimeSequence.read(capture: capture, drops: self.pcapDrops)
                connections = (graph, capture, self.pcapDrops != nil)
            } catch {
                printError("netcond: the report draws no connections: \(error)")
            }
        }
        try writeReports([(self.json, { json }), (self.html, { htmlReport(json, connections: connections) })])
    }
}

/// Parses `[host:]port=host:port`.
func parseForward(_ text: String) throws -> PortForward {
    let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
    guard parts.count == 2, let listen = try? parseListen(parts[0]),
        let colon = parts[1].lastIndex(of: ":"),
        let targetPort = Int(parts[1][parts[1].index(after: colon)...]), (1...65535).contains(targetPort),
        colon > parts[1].startIndex
    else {
        throw ValidationError(
            "--forward '\(text)' is not LISTEN=TARGET; allowed: [host:]port=host:port, e.g. 127.0.0.1:9000=example.com:80"
        )
    }
    let forward = PortForward(
        listenHost: listen.host,
        listenPort: listen.port,
        targetHost: String(parts[1][..<colon]).trimmingCharacters(in: "[]"),
        targetPort: targetPort
    )
    if forward.targetsItself {
        throw ValidationError(
            "--forward '\(text)' sends its port to itself: every connection would come back to netcond, and round again; "
                + "allowed: a target that is another port or another host"
        )
    }
    return forward
}

/// Parses `host:port`, `:port` or `port` (host defaults to 127.0.0.1).
func parseListen(_ text: String) throws -> (host: String, port: Int) {
    var host = "127.0.0.1"
    var portText = Substring(text)
    if let colon = text.lastIndex(of: ":") {
        let hostPart = text[..<colon]
        if !hostPart.isEmpty { host = String(hostPart).trimmingCharacters(in: "[]") }
        portText = text[text.index(after: colon)...]
    }
    guard let port = Int(portText), (0...65535).contains(port) else {
        throw ValidationError("'\(text)' is not an address to listen on; allowed: host:port, :port or port (0-65535)")
    }
    return (host, port)
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text = text.dropFirst() }
        while let last = text.last, set.contains(last) { text = text.dropLast() }
        return String(text)
    }
}

func currentEnvironment() -> [String: String] {
    var environment: [String: String] = [:]
    var pointer = environ
    while let entry = pointer.pointee {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "=") {
            environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        pointer += 1
    }
    return environment
}

/// Catches the signals a user sends netcond and passes them on to the child's process group; a group
/// still there ``killGrace`` seconds after the first is killed (SIGKILL), so that a child that ignores
/// them cannot keep netcond running.
final class SignalForwarder: @unchecked Sendable {
    /// How long the child's group has, after the first signal passed on to it, before SIGKILL.
    static let killGrace = 5.0

    private var sources: [DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "netcond.signals")
    /// Touched on `queue` only.
    private var killScheduled = false

    init() {
        for signal in ChildProcess.forwardedSignals {
            Glibc.signal(signal, SIG_IGN)
        }
    }

    /// Passes each caught signal on to `child`'s group; `onKill` is told (with the first signal) when
    /// the group had to be killed.
    func forward(to child: ChildProcess, onKill: (@Sendable (Int32) -> Void)? = nil) {
        for signal in ChildProcess.forwardedSignals {
            let source = DispatchSource.makeSignalSource(signal: signal, queue: self.queue)
            source.setEventHandler {
                guard child.signal(signal), !self.killScheduled else { return }
                self.killScheduled = true
                self.queue.asyncAfter(deadline: .now() + Self.killGrace) {
                    if child.signal(SIGKILL) { onKill?(signal) }
                }
            }
            source.resume()
            self.sources.append(source)
        }
    }

    /// Delivers each caught signal to `handler` instead (for `netcond proxy`).
    func onSignal(_ handler: @escaping @Sendable (Int32) -> Void) {
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            let source = DispatchSource.makeSignalSource(signal: signal, queue: self.queue)
            source.setEventHandler { handler(signal) }
            source.resume()
            self.sources.append(source)
        }
    }

    func stop() {
        for source in self.sources { source.cancel() }
        self.sources = []
    }
}

/// `SIGTERM` for 15, as a user would write it.
func signalName(_ signal: Int32) -> String {
    let names: [Int32: String] = [SIGINT: "SIGINT", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP", SIGQUIT: "SIGQUIT"]
    return names[signal] ?? "signal \(signal)"
}
