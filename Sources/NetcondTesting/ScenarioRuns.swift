import Foundation
import NetcondCore
import NetcondOrigin
import NetcondProxy
import NetcondScenario

// The types a test meets, under the module it imports.
public typealias ScenarioReport = ScenarioOutcome
public typealias ScenarioCheck = CheckResult
public typealias ScenarioClientContext = InProcessClientContext
public typealias OutageBehaviour = NetcondCore.OutageBehaviour
public typealias StallDirection = NetcondCore.StallDirection
public typealias CutMode = NetcondCore.CutMode
public typealias NetworkStatus = ControlStatus
public typealias NetworkEvent = ProxyEvent
/// A request the built-in origin received (``ConditionedNetwork/originRequests``).
public typealias OriginRequest = OriginRequestLog.Entry
/// A profile built in code, for ``NetworkProfile/profile(_:)``.
public typealias Profile = NetcondCore.Profile
/// A TLS library for HTTPS in a test's network (`.nioSSL`, from the `NetcondTLS` product).
public typealias TLSProvider = NetcondProxy.TLSProvider

extension Netcond {
    /// Runs a scenario file (`Scenarios/resume-after-dropout.yaml`) against `client`, a function in
    /// this process, and returns its verdict with the evidence: `#expect(report.passed)`, and
    /// `report.results` for each check. The client gets the scenario's URL as one it reaches
    /// without a proxy (through the same link), and logs its output lines with `context.log`.
    /// Returning is exit 0, throwing exit 1; at the scenario's deadline the function is cancelled.
    /// `tls`: as for ``Netcond/start(profile:seed:tls:)``.
    public static func run(
        scenario path: String, seed: UInt64? = nil, tls: (any TLSProvider)? = nil,
        client: @escaping @Sendable (ScenarioClientContext) async throws -> Void
    ) async throws -> ScenarioReport {
        let scenario = try ScenarioDecoder.decodeFile(atPath: path)
        return try await Self.run(scenario: scenario, seed: seed, tls: tls, client: client)
    }

    /// Runs a scenario already read (`ScenarioDecoder`, NetcondCore's) against `client`.
    public static func run(
        scenario: Scenario, seed: UInt64? = nil, tls: (any TLSProvider)? = nil,
        client: @escaping @Sendable (ScenarioClientContext) async throws -> Void
    ) async throws -> ScenarioReport {
        return try await ScenarioRunner.run(
            scenario, client: .function(client), seed: Self.seed(seed),
            baseEnvironment: ProcessInfo.processInfo.environment,
            echo: .none, tls: tls)
    }
}

extension ScenarioOutcome {
    /// One line per check: `✓ resumes — …` or `✗ completes — …`, and how to repeat the run.
    public var verdictText: String {
        (self.results.isEmpty
            ? "✗ \(Self.nothingJudged)"
            : self.results.map { "\($0.passed ? "✓" : "✗") \($0.name) — \($0.evidence)" }.joined(separator: "\n"))
            + "\n(seed \(self.seed))"
    }
}
