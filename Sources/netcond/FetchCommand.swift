import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NetcondCore
import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

/// netcond's own small HTTP client, for the demo and for tests: it can behave well (`--resume`:
/// ask for the rest after a drop, back off between attempts) or badly (`--retries` alone: start
/// over every time), so the demo shows a check passing and failing without any program of the user's.
struct FetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract:
            "GET an http:// URL through $http_proxy (directly when it is not set) and print status, size and timing (a client for tests and the demo).",
        shouldDisplay: false
    )

    @Argument(help: "An http:// URL.")
    var url: String

    @Option(name: .short, help: "Write the body here (only a 200 or 206 body).")
    var output: String?

    @Option(name: .long, help: "Attempts after the first when one fails (a cut, an error status, no connection).")
    var retries: Int = 0

    @Flag(name: .long, help: "After a cut, ask for the rest (Range: bytes=N-) instead of starting over (needs -o).")
    var resume = false

    @Option(name: .long, help: "Seconds before the first retry; each further wait doubles.")
    var wait: Double = 0.5

    /// The host and port of `http://host[:port][/...]` (port 80 when none).
    static func hostPort(ofURL text: String) -> (String, Int)? {
        guard text.hasPrefix("http://") else { return nil }
        let rest = text.dropFirst("http://".count)
        let authority = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard !authority.isEmpty else { return nil }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            let host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.isEmpty { return (host, 80) }
            guard after.hasPrefix(":"), let port = Int(after.dropFirst()), (1...65535).contains(port) else {
                return nil
            }
            return (host, port)
        }
        if let colon = authority.lastIndex(of: ":") {
            guard let port = Int(authority[authority.index(after: colon)...]), (1...65535).contains(port) else {
                return nil
            }
            return (String(authority[..<colon]), port)
        }
        return (String(authority), 80)
    }

    func validate() throws {
        if self.resume && self.output == nil { throw ValidationError("--resume needs -o FILE") }
        guard (0...100).contains(self.retries) else {
            throw ValidationError("--retries must be 0…100, got \(self.retries)")
        }
        guard self.wait.isFinite, (0...3600).contains(self.wait) else {
            throw ValidationError("--wait must be 0…3600 seconds, got \(self.wait)")
        }
    }

    func run() async throws {
        // Through the proxy when there is one (netcond run's proxy engine); else to the server itself
        // (the packet engine sets no proxy: the server takes the absolute-form request as well).
        let proxy = getenv("http_proxy").map { String(cString: $0) } ?? ""
        let target = proxy.isEmpty ? Self.hostPort(ofURL: self.url) : Self.hostPort(ofURL: proxy)
        guard let (host, port) = target else {
            printError(
                proxy.isEmpty
                    ? "netcond fetch: '\(self.url)' is not an http://host[:port]/path URL"
                    : "netcond fetch: http_proxy is not set to http://host:port")
            throw ExitCode(2)
        }
        let fetcher = HTTPFetcher(proxyHost: host, proxyPort: port)
        guard let output = self.output else {
            do {
                let result = try await fetcher.get(self.url, keepBody: false)
                print("\(result.status) \(result.bodyBytes) \(result.timeToFirstByte.seconds) \(result.total.seconds)")
                return
            } catch {
                printError("netcond fetch: \(error)")
                throw ExitCode(1)
            }
        }
        guard FileManager.default.createFile(atPath: output, contents: nil),
            let file = FileHandle(forWritingAtPath: output)
        else {
            printError("netcond fetch: cannot write \(output)")
            throw ExitCode(1)
        }
        defer { try? file.close() }
        let writer = BodyWriter(file: file)
        var wait = self.wait
        for attempt in 0...self.retries {
            if attempt > 0 {
                try? await Task.sleep(nanoseconds: UInt64(wait * 1e9))
                wait = min(wait * 2, 3600)
            }
            let have = self.resume ? writer.length : 0
            if !self.resume { writer.truncate() }
            writer.newAttempt()
            let range = have > 0 ? [("Range", "bytes=\(have)-")] : []
            if attempt > 0 {
                printError(
                    "netcond fetch: attempt \(attempt + 1)"
                        + (have > 0 ? ", asking for the rest (Range: bytes=\(have)-)" : ", from the start"))
            }
            do {
                let result = try await fetcher.send(
                    method: "GET", url: self.url, headers: range, keepBody: false,
                    sink: { status, body in writer.write(status: status, body) })
                if result.status == 200 || result.status == 206 {
                    print("\(result.status) \(writer.length) \(result.timeToFirstByte.seconds) \(result.total.seconds)")
                    return
                }
                printError("netcond fetch: HTTP \(result.status)")
            } catch {
                printError("netcond fetch: \(error) after \(writer.length) bytes")
            }
        }
        printError("netcond fetch: giving up after \(self.retries + 1) attempt\(self.retries == 0 ? "" : "s")")
        throw ExitCode(1)
    }
}

/// Appends the body of a 206 and starts the file again for a 200.
private final class BodyWriter: Sendable {
    private let file: NIOLockedValueBox<FileHandle>
    private let state = NIOLockedValueBox((length: Int64(0), rewound: false))

    init(file: FileHandle) { self.file = NIOLockedValueBox(file) }

    var length: Int64 { self.state.withLockedValue { $0.length } }

    func truncate() {
        self.file.withLockedValue { file in
            try? file.truncate(atOffset: 0)
        }
        self.state.withLockedValue { $0 = (0, false) }
    }

    /// The start of a new response: a 200 replaces what was there.
    func write(status: Int, _ body: ByteBuffer) {
        guard status == 200 || status == 206 else { return }
        self.state.withLockedValue { state in
            self.file.withLockedValue { file in
                if status == 200 && !state.rewound {
                    try? file.truncate(atOffset: 0)
                    state.length = 0
                }
                state.rewound = true
                try? file.seek(toOffset: UInt64(state.length))
                file.write(Data(body.readableBytesView))
                state.length += Int64(body.readableBytes)
            }
        }
    }

    /// Call before each attempt: the next 200 may start the file over.
    func newAttempt() { self.state.withLockedValue { $0.rewound = false } }
}
