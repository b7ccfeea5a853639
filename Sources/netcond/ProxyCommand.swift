import ArgumentParser
import NetcondCore
import NetcondProxy
import NetcondScenario
import NetcondTLS

#if canImport(Glibc)
import Glibc
#endif

struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Run the proxy alone, for manual throttling while developing.",
        discussion: """
            One port speaks HTTP proxy, CONNECT and SOCKS5. Point a browser or a program at it \
            (export http_proxy=http://127.0.0.1:8080 https_proxy=http://127.0.0.1:8080). Ctrl-C stops it \
            and prints the summary.
            """
    )

    @Argument(
        help: "A built-in profile name (see `netcond profiles`) or a profile YAML file.", completion: profileCompletion)
    var profile: String

    @Option(name: .long, help: "Where to listen: host:port, :port or port (default 127.0.0.1:8080; 0 = any free port).")
    var listen: String = "127.0.0.1:8080"

    @Option(name: .long, help: "Also forward LISTEN=TARGET ([host:]port=host:port), for programs that ignore proxies.")
    var forward: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where the control API (netcond ctl) listens: host:port, :port or port (0 = any free port).",
            discussion: "Default: loopback (127.0.0.1, or the proxy's own loopback address) at the proxy's port + 1, "
                + "whatever --listen says. The API has no authentication: a host other than loopback lets anyone "
                + "who reaches it change the conditions."
        )
    )
    var control: String?

    @Flag(name: .long, help: "Serve no control API.")
    var noControl = false

    @Flag(
        name: .long,
        help: "Relay forwards through netcond's own loop even while nothing shapes them (no kernel splice).")
    var noSplice = false

    @OptionGroup var seed: SeedOption

    @OptionGroup var lowLatency: LowLatencyOption

    func validate() throws {
        let listen = try parseListen(self.listen)
        _ = try self.forward.map(parseForward)
        if let control = self.control {
            if self.noControl { throw ValidationError("--control and --no-control exclude each other") }
            _ = try parseListen(control)
        } else if listen.port == 65535 && !self.noControl {
            throw ValidationError(
                "the control API's default port would be 65536; give --control host:port or --no-control")
        }
    }

    /// The control API's address: `--control`, else loopback at the listen port + 1 (any port when
    /// listening on 0), even when the proxy listens on every interface.
    private func controlAddress(listen: (host: String, port: Int)) throws -> (host: String, port: Int)? {
        if self.noControl { return nil }
        if let control = self.control { return try parseListen(control) }
        return ListenerExposure.defaultControl(listenHost: listen.host, listenPort: listen.port)
    }

    func run() async throws {
        let profile = resolveProfile(self.profile)
        if let refusal = profile.streamEngineRefusal {
            printError("netcond: \(refusal)")
            throw ExitCode(2)
        }
        let seed = try self.seed.resolve()
        let latencyHold = self.lowLatency.hold()
        defer { withExtendedLifetime(latencyHold) {} }
        let listen = try parseListen(self.listen)
        let forwards = try self.forward.map(parseForward)
        let control = try self.controlAddress(listen: listen)
        for warning in ListenerExposure.warnings(proxy: listen, control: control, forwards: forwards) {
            printError(warning)
        }
        let signals = SignalForwarder()
        let status = LiveStatus(live: true)
        let session: Session
        do {
            session = try await Session.start(
                profile: profile,
                seed: seed,
                listenHost: listen.host,
                listenPort: listen.port,
                forwards: forwards,
                control: control,
                // Forwards relay in the kernel while nothing needs to see their bytes.
                splices: !self.noSplice,
                tls: .nioSSL,
                onStateChange: { state, at in status.stateChanged(state, at: at) }
            )
        } catch {
            printError("netcond: \(error)")
            throw ExitCode(3)
        }
        print("netcond: \(profile.name) proxy on \(session.proxyURL) (HTTP, CONNECT, SOCKS5), seed \(seed)")
        for (forward, address) in zip(forwards, session.forwardAddresses) {
            print(
                "netcond: forwarding \(address.ipAddress ?? "?"):\(address.port ?? 0) → \(forward.targetHost):\(forward.targetPort)"
            )
        }
        print(
            "netcond: built-in origin at http://\(Session.originHost) and https://\(Session.originHost) (through the proxy; "
                + "for HTTPS point clients at the run's CA: SSL_CERT_FILE=\(session.trust?.bundlePath ?? "?"), removed when the proxy stops)"
        )
        if let controlURL = session.controlURL {
            print("netcond: control API on \(controlURL) (netcond ctl status --control \(controlURL))")
            print("netcond: dashboard on \(controlURL)/ (live graphs and controls, in a browser)")
        }
        print("  export http_proxy=\(session.proxyURL) https_proxy=\(session.proxyURL)")
        fflush(nil)
        let stopped = AsyncStream<Int32> { continuation in
            signals.onSignal { signal in continuation.yield(signal) }
        }
        let ticker = Task {
            // Nothing to redraw when stderr is not a terminal: no need to ask the proxy.
            while status.live && !Task.isCancelled {
                if let now = await session.proxy.status() { status.update(now) }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        for await _ in stopped { break }
        ticker.cancel()
        signals.stop()
        status.finish()
        printError(await session.summaryLine())
        await session.stop()
    }
}
