import ArgumentParser
import Foundation
import NetcondProxy
import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

struct ToxiproxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "toxiproxy",
        abstract: "Serve Toxiproxy's REST API: a Toxiproxy suite runs unchanged.",
        discussion: """
            Toxiproxy's clients (Go, Ruby, Python, Java, .NET) create proxies and add toxics as they do \
            against toxiproxy-server, and each connection meets its toxics as in Toxiproxy (--netcond-link: \
            latency, bandwidth and timeout set a netcond link instead). Each toxic and what still differs: \
            Docs/toxiproxy.md. Ctrl-C stops the API and every proxy.

            Example:
              netcond toxiproxy &
              curl -s -XPOST 127.0.0.1:8474/proxies -d '{"name": "redis",
                "listen": "127.0.0.1:26379", "upstream": "127.0.0.1:6379"}'
            """
    )

    @Option(name: .long, help: "Where the API listens: host:port, :port or port (default 127.0.0.1:8474, Toxiproxy's).")
    var listen: String = "127.0.0.1:8474"

    @Option(name: .long, help: "Create these proxies at start: a JSON list as toxiproxy-server -config takes.")
    var config: String?

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Accept requests whatever Host they name (a container's service name, toxiproxy:8474).",
            discussion: "By default only an IP address, localhost or --listen's name is accepted, so that a web page "
                + "cannot reach the API under a name of its own (DNS rebinding); browsers stay refused either way."))
    var anyHost = false

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Let latency, bandwidth and timeout toxics set a netcond link the proxy's connections share.",
            discussion: "As on a real path: a new connection's handshake pays the latency, TCP's window and slow start "
                + "hold the rate, a timeout holds the data and delivers it when it goes, and a half-close is passed on. "
                + "By default each connection meets its toxics on its own, exactly as in Toxiproxy; with this flag a "
                + "toxicity below 1 is refused for those three types."))
    var netcondLink = false

    @OptionGroup var seed: SeedOption

    func validate() throws {
        _ = try parseListen(self.listen)
    }

    func run() async throws {
        let seed = try self.seed.resolve()
        let listen = try parseListen(self.listen)
        var populate: [UInt8]?
        if let path = self.config {
            guard let data = FileManager.default.contents(atPath: path) else {
                printError("netcond: cannot read \(path)")
                throw ExitCode(2)
            }
            populate = Array(data)
        }
        let signals = SignalForwarder()
        let server = ToxiproxyServer(seed: seed, anyHost: self.anyHost, netcondLink: self.netcondLink)
        let address: String
        do {
            let bound = try await server.start(host: listen.host, port: listen.port)
            address = ListenerExposure.display(bound.ipAddress ?? listen.host, bound.port ?? listen.port)
        } catch {
            signals.stop()
            printError("netcond: \(error)")
            throw ExitCode(3)
        }
        if let populate, let path = self.config {
            let (status, json) = await server.populate(json: populate)
            guard status == 201 else {
                printError(
                    "netcond: \(path): \(String(decoding: json, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))"
                )
                signals.stop()
                await server.stop()
                throw ExitCode(status == 500 ? 3 : 2)
            }
        }
        if !HostAddress.isLoopback(listen.host) {
            printError(
                "netcond: warning: the Toxiproxy API listens on \(address), not only on loopback: anyone who can reach it "
                    + "can create proxies on this machine to any host and change their toxics (it has no authentication, as "
                    + "Toxiproxy's has none); to keep it to this machine: --listen 127.0.0.1:\(listen.port)")
        }
        print("netcond: Toxiproxy API on http://\(address) (as Toxiproxy \(ToxiproxyServer.version)), seed \(seed)")
        fflush(nil)
        let stopped = AsyncStream<Int32> { continuation in
            signals.onSignal { signal in continuation.yield(signal) }
        }
        for await _ in stopped { break }
        signals.stop()
        await server.stop()
    }
}
