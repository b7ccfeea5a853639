import ArgumentParser
import NetcondCore
import NetcondScenario

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

    @Argument(help: "A built-in profile name (see `netcond profiles`) or a profile YAML file.")
    var profile: String

    @Option(name: .long, help: "Where to listen: host:port, :port or port (default 127.0.0.1:8080; 0 = any free port).")
    var listen: String = "127.0.0.1:8080"

    @Option(name: .long, help: "Also forward LISTEN=TARGET ([host:]port=host:port), for programs that ignore proxies.")
    var forward: [String] = []

    @OptionGroup var seed: SeedOption

    func validate() throws {
        _ = try parseListen(self.listen)
        _ = try self.forward.map(parseForward)
    }

    func run() async throws {
        let profile = resolveProfile(self.profile)
        let seed = try self.seed.resolve()
        let listen = try parseListen(self.listen)
        let forwards = try self.forward.map(parseForward)
        let signals = SignalForwarder()
        let session: Session
        do {
            session = try await Session.start(
                profile: profile,
                seed: seed,
                listenHost: listen.host,
                listenPort: listen.port,
                forwards: forwards
            )
        } catch {
            printError("netcond: \(error)")
            throw ExitCode(3)
        }
        print("netcond: \(profile.name) proxy on \(session.proxyURL) (HTTP, CONNECT, SOCKS5), seed \(seed)")
        for (forward, address) in zip(forwards, session.forwardAddresses) {
            print("netcond: forwarding \(address.ipAddress ?? "?"):\(address.port ?? 0) → \(forward.targetHost):\(forward.targetPort)")
        }
        print("netcond: built-in origin at http://\(Session.originHost) (through the proxy)")
        print("  export http_proxy=\(session.proxyURL) https_proxy=\(session.proxyURL)")
        fflush(nil)
        let stopped = AsyncStream<Int32> { continuation in
            signals.onSignal { signal in continuation.yield(signal) }
        }
        for await _ in stopped { break }
        signals.stop()
        printError(await session.summaryLine())
        await session.stop()
    }
}
