import ArgumentParser
import Foundation
import NetcondCore
import NetcondScenario
import NetcondTLS

#if canImport(Glibc)
import Glibc
#endif

/// `netcond demo`: the product in one command, with nothing to install. A download over EDGE is
/// cut part-way; netcond runs the scenario twice with its own small client, once starting over
/// after the drop and once asking for the rest, and shows the verdict on each with its evidence.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract:
            "Run a built-in scenario twice against the built-in origin, with a client that resumes and one that does not (no internet needed).",
        discussion: """
            The scenario: a 96 KB download under the profile (default edge) is cut after 40 KB. \
            netcond's own client runs it first starting over after the cut (the resumes check fails) \
            and then asking for the rest with Range (it passes). Exit 0 when both verdicts come out \
            that way. `netcond demo --show-scenario` prints the scenario's YAML.
            """
    )

    @Argument(help: "Profile (default edge).")
    var profile: String = "edge"

    @Flag(name: .long, help: "Print the demo scenario's YAML and exit.")
    var showScenario = false

    @Option(name: .long, help: "proxy (default) or packet (root: the client's own packets cross the link).")
    var engine: Engine?

    @OptionGroup var seed: SeedOption

    static func yaml(profile: String) -> String {
        """
        name: demo-resume-after-dropout
        description: "A 96 KB download is cut after 40 KB; a good client asks for the rest instead of starting over."
        profile: \(profile)
        origin:
          files:
            photo.jpg: {size: 96KB, seed: 11}
          faults:
            - {file: photo.jpg, cut_after: 40KB, first: 1}
        client:
          url: /files/photo.jpg
          output: photo.jpg
          deadline: 60s
        checks:
          completes: {}
          resumes: {slack: 16KB, tolerance: 10%}

        """
    }

    func run() async throws {
        let profile = resolveProfile(self.profile)
        let yaml = Self.yaml(profile: ProfileCatalog.looksLikePath(self.profile) ? "\"\(self.profile)\"" : profile.name)
        if self.showScenario {
            print(yaml, terminator: "")
            return
        }
        let scenario: Scenario
        do {
            scenario = try ScenarioDecoder.decode(yaml: yaml, file: "(demo scenario)")
        } catch {
            printError("netcond: \(error.description)")
            throw ExitCode(3)
        }
        let seed = try self.seed.resolve()
        let me = Self.executablePath()
        print("netcond demo: \(scenario.description)")
        print("  profile \(profile.name) — \(profile.description)")
        print(
            "  the scenario: netcond demo --show-scenario; the same with your client: netcond run SCENARIO.yaml -- CLIENT"
        )
        let runs: [(title: String, command: [String], shouldPass: Bool)] = [
            (
                "a client that starts over after the drop",
                [me, "fetch", "--retries", "3", "-o", "photo.jpg", "http://origin.netcond.test/files/photo.jpg"], false
            ),
            (
                "a client that asks for the rest",
                [
                    me, "fetch", "--retries", "3", "--resume", "-o", "photo.jpg",
                    "http://origin.netcond.test/files/photo.jpg",
                ], true
            ),
        ]
        var asExpected = true
        for (index, run) in runs.enumerated() {
            print("\n\(index + 1). \(run.title): \(ScenarioReport.shellLine(["netcond"] + run.command.dropFirst()))")
            fflush(nil)
            let outcome: ScenarioOutcome
            do {
                outcome = try await ScenarioRunner.run(
                    scenario, client: .command(run.command), seed: seed, baseEnvironment: currentEnvironment(),
                    echo: .none,
                    onEvent: { line in print("   netcond: \(line)") }, engine: self.engine?.runEngine ?? .proxy,
                    tls: .nioSSL)
            } catch {
                printError("netcond: \(error.description)")
                throw ExitCode(error.exitCode)
            }
            for line in outcome.clientOutput.tail.split(separator: "\n") where line.hasPrefix("netcond fetch:") {
                print("   client: " + line.dropFirst("netcond fetch: ".count))
            }
            for line in ScenarioReport.checkLines(outcome) { print("   " + line) }
            print("   → \(outcome.passed ? "passed" : "FAILED") (\(outcome.linkSummary))")
            asExpected = asExpected && outcome.passed == run.shouldPass
        }
        print(
            asExpected
                ? "\nThe verdict tells the two clients apart, with the evidence. Next: netcond test Scenarios/ -- YOUR-CLIENT"
                : "\nnetcond demo: the verdicts did not come out as expected (the first run should fail, the second pass)"
        )
        if !asExpected { throw ExitCode(1) }
    }

    /// This program's own path, to run `netcond fetch` as the demo's client.
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if count > 0 { return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return CommandLine.arguments[0]
    }
}
