import ArgumentParser
import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

struct FetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "GET an http:// URL through $http_proxy and print status, size and timing (a client for tests).",
        shouldDisplay: false
    )

    @Argument(help: "An http:// URL.")
    var url: String

    func run() async throws {
        guard let proxy = getenv("http_proxy").map({ String(cString: $0) }),
            let hostPort = proxy.split(separator: "/").last, let colon = hostPort.lastIndex(of: ":"),
            let port = Int(hostPort[hostPort.index(after: colon)...])
        else {
            printError("netcond fetch: http_proxy is not set to http://host:port")
            throw ExitCode(2)
        }
        let host = String(hostPort[..<colon])
        do {
            let result = try await HTTPFetcher(proxyHost: host, proxyPort: port).get(self.url, keepBody: false)
            print("\(result.status) \(result.bodyBytes) \(result.timeToFirstByte.seconds) \(result.total.seconds)")
        } catch {
            printError("netcond fetch: \(error)")
            throw ExitCode(1)
        }
    }
}
