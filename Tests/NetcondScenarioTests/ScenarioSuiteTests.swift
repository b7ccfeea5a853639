import Foundation
import Testing

#if canImport(FoundationXML)
import FoundationXML
#endif

@testable import NetcondCore
@testable import NetcondScenario

/// `netcond test`'s pure parts: which files a folder names, filters, exit codes and the reports.
@Suite struct ScenarioSuiteTests {
    static let scenarioYAML = """
        name: NAME
        profile: lte
        client: {url: /bytes/1KB}
        checks: {completes: {}}
        """

    /// A fresh folder with `files` (relative path → text); removed by the caller.
    func folder(_ files: [String: String]) throws -> String {
        let base = NSTemporaryDirectory() + "netcond-suite-\(UUID().uuidString)"
        for (relative, text) in files {
            let path = base + "/" + relative
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        return base
    }

    @Test func aFolderNamesItsScenariosSortedAndSkipsProfiles() throws {
        let base = try self.folder([
            "b.yaml": Self.scenarioYAML.replacingOccurrences(of: "NAME", with: "b"),
            "a.yml": Self.scenarioYAML.replacingOccurrences(of: "NAME", with: "a"),
            "nested/c.yaml": Self.scenarioYAML.replacingOccurrences(of: "NAME", with: "c"),
            "slow.yaml": "name: slow\ndown: {bandwidth: 1Mbit}\n",
            "notes.txt": "not yaml",
            "broken.yaml": "profile: lte\nchecks: {completes: {}\n",
        ])
        defer { try? FileManager.default.removeItem(atPath: base) }
        let found = try ScenarioSuite.discover([base + "/"])
        // A malformed file is kept (decoding it reports the error), a profile is skipped.
        #expect(found.files == [base + "/a.yml", base + "/b.yaml", base + "/broken.yaml", base + "/nested/c.yaml"])
        #expect(found.skipped == [base + "/slow.yaml"])
        // A file named twice (directly and through its folder) runs once.
        let twice = try ScenarioSuite.discover([base + "/b.yaml", base])
        #expect(twice.files.filter { $0.hasSuffix("b.yaml") }.count == 1)
    }

    @Test func aFolderThatIsASymbolicLinkIsSearchedThroughIt() throws {
        let base = try self.folder(["a.yaml": Self.scenarioYAML.replacingOccurrences(of: "NAME", with: "a")])
        defer { try? FileManager.default.removeItem(atPath: base) }
        let link = base + "-link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: base)
        defer { try? FileManager.default.removeItem(atPath: link) }
        #expect(try ScenarioSuite.discover([link + "/"]).files == [link + "/a.yaml"])
        #expect(try ScenarioSuite.discover([link]).files == [link + "/a.yaml"])
    }

    @Test func missingPathsAndFoldersWithoutScenariosAreErrors() throws {
        let base = try self.folder(["slow.yaml": "name: slow\n"])
        defer { try? FileManager.default.removeItem(atPath: base) }
        #expect(throws: ScenarioSuite.DiscoveryError.self) { try ScenarioSuite.discover([base]) }
        do {
            _ = try ScenarioSuite.discover([base + "/missing"])
            Issue.record("a missing path was accepted")
        } catch {
            #expect(error.description.contains("missing: no such file or directory"))
        }
    }

    @Test func filtersAreSubstringsOrGlobs() {
        #expect(ScenarioSuite.matches("resume-after-dropout", patterns: []))
        #expect(ScenarioSuite.matches("resume-after-dropout", patterns: ["dropout"]))
        #expect(ScenarioSuite.matches("resume-after-dropout", patterns: ["DROPOUT"]))
        #expect(ScenarioSuite.matches("resume-after-dropout", patterns: ["backoff-*", "resume-*"]))
        #expect(!ScenarioSuite.matches("resume-after-dropout", patterns: ["backoff"]))
        #expect(ScenarioSuite.matches("resume-after-dropout", patterns: ["resume"]))
        // A glob matches the whole name, not a part of it.
        #expect(!ScenarioSuite.matches("resume-after-dropout", patterns: ["drop*"]))
    }

    func outcome(_ name: String, passed: Bool, output: String? = nil) -> ScenarioOutcome {
        let scenario = Scenario(
            name: name, description: "", file: "Scenarios/\(name).yaml", profile: Profile(name: "lte"), timeline: [],
            origin: OriginContent(), client: ClientSpec(command: ["wget", "x"]), checks: [])
        let evidence = RunEvidence(
            exit: .exited(passed ? 0 : 8), timedOut: false, deadline: .seconds(60), duration: 1.25,
            requests: [
                RunEvidence.Request(at: 0.2, path: "/files/big.bin", range: "bytes=10-", status: 206, bodyBytesSent: 5)
            ], workingDirectory: "/nonexistent", origin: OriginContent())
        let results = [
            CheckResult(name: "completes", passed: true, evidence: "exit 0 after 1.25s"),
            CheckResult(
                name: "resumes", passed: passed, evidence: passed ? "cut at 5 → Range" : "asked for <all> & \"more\""),
        ]
        return ScenarioOutcome(
            scenario: scenario, seed: 42, command: ["curl", "-o", "out file"], evidence: evidence, results: results,
            applied: [(at: 0.5, what: "outage (refuse)")], startup: 0.05, linkSummary: "lte: 1.3 s",
            clientOutput: ClientOutput(
                tail: output ?? "", stderrTail: output ?? ""))
    }

    @Test func aRunThatJudgedNothingPassesNothing() {
        // A scenario built in code may have no checks: its run is not a pass, and every report says why.
        var outcome = self.outcome("empty", passed: true)
        outcome.results = []
        #expect(!outcome.passed)
        #expect(ScenarioSuite.exitCode([.ran(outcome)]) == 1)
        #expect(
            ScenarioReport.verdictLine(outcome, scenarioArgument: "empty.yaml").contains("FAILED (no check was judged"))
        #expect(ScenarioReport.checkLines(outcome) == ["✗ " + ScenarioOutcome.nothingJudged])
        let xml = ScenarioSuite.junit([.ran(outcome)], seconds: 1)
        #expect(xml.contains("<failure type=\"no-checks\""))
    }

    @Test func exitCodesAndSummary() {
        let pass = ScenarioSuite.Result.ran(self.outcome("a", passed: true))
        let fail = ScenarioSuite.Result.ran(self.outcome("b", passed: false))
        let error = ScenarioSuite.Result.error(self.outcome("c", passed: true).scenario, "cannot start")
        let missing = ScenarioSuite.Result.error(self.outcome("d", passed: true).scenario, "command not found: x")
        #expect(ScenarioSuite.exitCode([pass]) == 0)
        #expect(ScenarioSuite.exitCode([pass, fail]) == 1)
        #expect(ScenarioSuite.exitCode([pass, missing]) == 3)
        #expect(ScenarioSuite.exitCode([fail, error]) == 3)
        #expect(
            ScenarioSuite.summaryLine([pass, fail, missing], seconds: 75)
                == "3 scenarios: 1 passed, 1 failed (b), 1 could not run (d) in 1 min 15 s")
    }

    @Test func junitHasOneTestcasePerScenarioWithTheEvidence() throws {
        let results: [ScenarioSuite.Result] = [
            .ran(self.outcome("a", passed: true)),
            .ran(self.outcome("b", passed: false, output: "curl: (18) transfer closed\u{1B}[0m")),
            .error(self.outcome("c", passed: true).scenario, "command not found: x"),
        ]
        let xml = ScenarioSuite.junit(results, seconds: 3.5)
        let document = try XMLDocument(xmlString: xml)
        let cases = try document.nodes(forXPath: "//testcase")
        #expect(cases.count == 3)
        #expect(try document.nodes(forXPath: "/testsuites[@tests='3'][@failures='1'][@errors='1']").count == 1)
        let failure = try #require(try document.nodes(forXPath: "//testcase[@name='b']/failure").first as? XMLElement)
        #expect(failure.attribute(forName: "message")?.stringValue == "resumes: asked for <all> & \"more\"")
        #expect(
            failure.stringValue?.contains("repeat with: netcond run Scenarios/b.yaml --seed 42 -- curl -o 'out file'")
                == true)
        let systemErr = try document.nodes(forXPath: "//testcase[@name='b']/system-err").first?.stringValue
        #expect(systemErr == "curl: (18) transfer closed[0m")
        #expect(try document.nodes(forXPath: "//testcase[@name='a']/failure").isEmpty)
        #expect(try document.nodes(forXPath: "//testcase[@name='c']/error[@message='command not found: x']").count == 1)
        #expect(
            try document.nodes(forXPath: "//testcase[@name='a']/system-out").first?.stringValue?.contains(
                "+0.5 s  outage (refuse)") == true)
    }

    @Test func jsonCarriesVerdictsChecksAndRequests() throws {
        let text = ScenarioSuite.json([.ran(self.outcome("b", passed: false))], seconds: 2)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(root["passed"] as? Bool == false)
        let scenario = try #require((root["scenarios"] as? [[String: Any]])?.first)
        #expect(scenario["verdict"] as? String == "failed")
        #expect(scenario["seed"] as? Int == 42)
        #expect((scenario["checks"] as? [[String: Any]])?.map { $0["passed"] as? Bool } == [true, false])
        let request = try #require((scenario["requests"] as? [[String: Any]])?.first)
        #expect(request["range"] as? String == "bytes=10-")
        #expect(request["status"] as? Int == 206)
    }
}

/// What the packet engine refuses in a scenario, before anything runs, each with its reason once.
@Suite struct PacketProblemsTests {
    static func scenario(_ timeline: String, profile: String = "edge") throws -> Scenario {
        try ScenarioDecoder.decode(
            yaml: """
                name: t
                profile: \(profile)
                client: {command: [true]}
                checks:
                  completes: {}
                timeline:
                \(timeline)
                """, file: "t.yaml")
    }

    @Test func timelineHTTPFaultsAndCloseCutsAreRefusedWithTheirReasonsOnce() throws {
        let problems = ScenarioRunner.packetProblems(
            try Self.scenario(
                """
                  - {at: 1s, fault: {status: 503}}
                  - {at: 2s, faults: clear}
                  - {at: 3s, cut: close}
                  - {at: 4s, cut: close}
                """))
        #expect(
            problems == [
                "its timeline changes HTTP faults (they need a proxy that reads HTTP; the origin's own faults work)",
                "its timeline cuts with close (the packet engine cuts with resets)",
            ])
    }

    @Test func aProfileTheTimelineSwitchesToIsCheckedToo() throws {
        let problems = ScenarioRunner.packetProblems(
            try Self.scenario(
                """
                  - {at: 1s, profile: {extends: 3g, faults: [{status: 500}]}}
                """))
        #expect(problems == ["a profile its timeline switches to uses HTTP faults (they need a proxy that reads HTTP)"])
    }

    @Test func outagesStallsResetsAndThePortalRun() throws {
        #expect(
            ScenarioRunner.packetProblems(
                try Self.scenario(
                    """
                      - {at: 1s, outage: reset}
                      - {at: 2s, outage: end}
                      - {at: 3s, stall: down}
                      - {at: 4s, cut: reset}
                      - {at: 5s, profile: 3g}
                    """)
            ).isEmpty)
    }
}
