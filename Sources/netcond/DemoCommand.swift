import ArgumentParser
import NetcondCore
import NetcondOrigin
import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Download from the built-in origin under a profile and show what the link did (no internet needed)."
    )

    @Argument(help: "Profile (default edge).")
    var profile: String = "edge"

    @Option(name: .long, help: "What to download from the origin.")
    var path: String = "/bytes/200KB"

    @OptionGroup var seed: SeedOption

    func run() async throws {
        let profile = resolveProfile(self.profile)
        let seed = try self.seed.resolve()
        let session: Session
        do {
            session = try await Session.start(profile: profile, seed: seed)
        } catch {
            printError("netcond: \(error)")
            throw ExitCode(3)
        }
        let url = "http://\(Session.originHost)\(self.path)"
        print("netcond demo: \(profile.name) — \(profile.description)")
        print("  down \(profile.down.bandwidth.map { "\($0)" } ?? "unlimited"), up \(profile.up.bandwidth.map { "\($0)" } ?? "unlimited"), "
            + "one-way delay \(profile.down.latency) / \(profile.up.latency)")
        print("  GET \(url) through the proxy at \(session.proxyURL)")
        fflush(nil)
        let fetcher = HTTPFetcher(proxyHost: "127.0.0.1", proxyPort: session.proxyAddress.port ?? 0)
        let printer = ProgressPrinter()
        var failed = false
        do {
            let result = try await fetcher.get(url, keepBody: true) { bytes in printer.update(bytes) }
            let expected = DeterministicBytes(seed: 0)
            let intact = result.status != 200 || expected.firstMismatch(in: result.body, offset: 0) == nil
            print("  HTTP \(result.status): \(result.bodyBytes) bytes, first byte after \(format(result.timeToFirstByte)), "
                + "done after \(format(result.total)) — bytes \(intact ? "intact" : "CORRUPTED")")
            failed = !intact || result.status >= 400
        } catch {
            print("  failed: \(error)")
            failed = true
        }
        printError(await session.summaryLine())
        await session.stop()
        if failed { throw ExitCode(1) }
    }

    private func format(_ span: Span) -> String {
        span.seconds < 1 ? "\(Int(span.milliseconds)) ms" : "\((span.seconds * 100).rounded() / 100) s"
    }
}

/// Prints a progress line at most every 250 ms.
final class ProgressPrinter: @unchecked Sendable {
    private var lastPrinted = 0.0
    private let start = ProgressPrinter.now()

    func update(_ bytes: Int) {
        let now = Self.now()
        guard now - self.lastPrinted >= 0.25 else { return }
        self.lastPrinted = now
        print("  … \(bytes / 1024) KB after \(((now - self.start) * 10).rounded() / 10) s")
        fflush(nil)
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
