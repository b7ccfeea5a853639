import Foundation
import Testing

@testable import NetcondCore

/// Names in users' files may not hold control characters (a file could drive the terminal they are
/// printed on); other text is escaped before it reaches one.
@Suite struct TerminalTextTests {
    static let scenarioFile = "Scenarios/hostile.yaml"
    static let profileFile = "Profiles/hostile.yaml"

    func scenarioError(_ yaml: String, file: String = TerminalTextTests.scenarioFile) -> ConfigError? {
        do {
            _ = try ScenarioDecoder.decode(yaml: yaml, file: file)
            return nil
        } catch {
            return error
        }
    }

    func profileError(_ yaml: String, file: String = TerminalTextTests.profileFile) -> ConfigError? {
        do {
            _ = try ProfileDecoder().decode(yaml: yaml, file: file)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        arguments: [
            // YAML escapes in double quotes: \e is ESC, \a BEL, \x7F DEL, \x9B the one-byte CSI.
            ("\"ok\\e[2Jgone\"", "U+001B", 3),
            ("\"title\\e]0;pwned\\a\"", "U+001B", 6),
            ("\"a\\tb\"", "U+0009", 2),
            ("\"del\\x7F\"", "U+007F", 4),
            ("\"csi\\x9B31m\"", "U+009B", 4),
        ] as [(String, String, Int)])
    func scenarioNamesRefuseControlCharacters(name: String, code: String, position: Int) throws {
        let error = try #require(self.scenarioError("name: \(name)\nprofile: edge\nchecks: {completes: {}}\n"))
        #expect(error.file == Self.scenarioFile && error.line == 1 && error.column == 7, "\(error)")
        #expect(error.keyPath == "name")
        #expect(error.message.contains("has a control character (\(code)) at character \(position)"), "\(error)")
        #expect(error.message.contains("allowed: printable characters (no control characters"), "\(error)")
        #expect(!error.description.unicodeScalars.contains(where: TerminalText.isControl), "\(error)")
    }

    @Test func aScenarioNamedByItsFileIsCheckedToo() throws {
        let file = "Scenarios/bell\u{07}.yaml"
        let error = try #require(self.scenarioError("profile: edge\nchecks: {completes: {}}\n", file: file))
        #expect(error.line == 0)
        #expect(error.message.contains("the file name, the scenario's name without a name: key,"), "\(error)")
        #expect(error.message.contains("rename the file or add a name: key"), "\(error)")
        #expect(error.description.hasPrefix("Scenarios/bell\\u0007.yaml: "), "\(error)")
    }

    @Test func profileFaultAndPhaseNamesRefuseControlCharacters() throws {
        let profile = try #require(self.profileError("name: \"edge\\e[31m\"\n"))
        #expect(profile.line == 1 && profile.column == 7 && profile.keyPath == "name", "\(profile)")
        #expect(
            profile.message.contains("the profile name \"edge\\u001B[31m\" has a control character (U+001B)"),
            "\(profile)")

        let fault = try #require(self.profileError("faults:\n  - {name: \"fl\\x7Fky\", status: 503}\n"))
        #expect(fault.line == 2 && fault.column == 12 && fault.keyPath == "faults[0].name", "\(fault)")
        #expect(fault.message.contains("the fault name \"fl\\u007Fky\" has a control character (U+007F)"), "\(fault)")
        #expect(fault.message.contains("e.g. flaky-api"), "\(fault)")

        let phase = try #require(
            self.profileError(
                "schedule:\n  phases:\n    - {name: \"tun\\rnel\", for: 10s, outage: blackhole}\n"))
        #expect(phase.line == 3 && phase.keyPath == "schedule.phases[0].name", "\(phase)")
        #expect(phase.message.contains("the phase name \"tun\\rnel\" has a control character (U+000D)"), "\(phase)")

        let named = try #require(self.profileError("down: {latency: 10ms}\n", file: "Profiles/x\u{1B}[2J.yaml"))
        #expect(named.message.contains("the file name, the profile's name without a name: key,"), "\(named)")

        // A fault added by a scenario's timeline.
        let timeline = try #require(
            self.scenarioError(
                """
                profile: edge
                timeline:
                  - {at: 1s, fault: {name: "x\\ay", status: 503}}
                checks: {completes: {}}
                """))
        #expect(timeline.line == 3, "\(timeline)")
        #expect(timeline.message.contains("control character (U+0007)"), "\(timeline)")
    }

    @Test func printableNamesInAnyScriptAreFine() throws {
        let scenario = try ScenarioDecoder.decode(
            yaml:
                "name: \"café ☕ – 3g, day 2\"\nprofile: {name: \"réseau lent\", down: {latency: 1ms}}\nchecks: {completes: {}}\n",
            file: Self.scenarioFile)
        #expect(scenario.name == "café ☕ – 3g, day 2")
        #expect(scenario.profile.name == "réseau lent")
    }

    @Test func aScenariosDescriptionIsOneLineWithControlCharactersEscaped() throws {
        let scenario = try ScenarioDecoder.decode(
            yaml:
                "name: d\ndescription: \"one\\ntwo\\tthree \\e]0;pwned\\a\"\nprofile: edge\nchecks: {completes: {}}\n",
            file: Self.scenarioFile)
        #expect(scenario.description == "one two three \\u001B]0;pwned\\u0007")
    }

    @Test func errorsEscapeWhatTheyQuote() {
        let error = ConfigError(
            file: "x\u{1B}.yaml", line: 2, column: 3, keyPath: "down", message: "unknown key '\u{1B}[2J'")
        #expect(error.description == "x\\u001B.yaml:2:3: down: unknown key '\\u001B[2J'")
        // An unknown key read from a file is quoted in the message: escaped too.
        let unknown = self.profileError("\"lat\\e[2Jency\": 1ms\n")
        #expect(
            unknown?.description.contains("unknown key 'lat\\u001B[2Jency'") == true, "\(String(describing: unknown))")
        #expect(TerminalText.escaped("plain – text ☕") == "plain – text ☕")
    }
}
