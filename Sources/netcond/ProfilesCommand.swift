import ArgumentParser
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

struct ProfilesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profiles",
        abstract: "List the built-in profiles, or show one resolved.",
        subcommands: [List.self, Show.self],
        defaultSubcommand: List.self
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the built-in profiles (and none).")

        func run() throws {
            print(Profile.summaryTable(ProfileCatalog.builtin + [Profile.passThrough]), terminator: "")
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Print a profile (built-in name or file) fully resolved, as YAML."
        )

        @Argument(help: "A built-in profile name or a profile YAML file.")
        var profile: String

        func run() throws {
            let profile = resolveProfile(self.profile)
            print(profile.yamlDescription, terminator: "")
            // A measured link's rate (and delay) a second at a time over one period, up to five
            // minutes (comments: the text still reads back).
            for direction in [Direction.down, Direction.up] {
                for line in TracePicture.lines(direction.rawValue, profile.direction(direction)) { print(line) }
            }
        }
    }
}

struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract:
            "Check profile and scenario files: every error of every file, in file order, as file:line:column and the reason; exit 2 if any was bad."
    )

    /// Errors shown per file; the rest are counted.
    static let maxErrorsPerFile = 50

    @Argument(help: "Profile or scenario YAML files (a scenario has checks: or client:).")
    var files: [String]

    func validate() throws {
        if self.files.isEmpty { throw ValidationError("give at least one file to validate") }
    }

    func run() throws {
        // Every file is read, in the order given: a bad one does not hide the next one's problems.
        var bad = 0
        for file in self.files {
            do {
                let (line, notices) = try ConfigNotices.collecting { () throws(ConfigError) in try Self.check(file) }
                print(line)
                for notice in notices { print("netcond: \(TerminalText.escaped(notice.description))") }
            } catch {
                bad += 1
                let all = error.all
                for shown in all.prefix(Self.maxErrorsPerFile) { printError("netcond: \(shown.oneLine)") }
                if all.count > Self.maxErrorsPerFile {
                    printError(
                        "netcond: \(TerminalText.escaped(file)): \(all.count - Self.maxErrorsPerFile) more errors not shown (\(all.count) in all)"
                    )
                }
            }
        }
        if bad > 0 {
            if self.files.count > 1 { printError("netcond: \(bad) of \(self.files.count) files are not valid") }
            throw ExitCode(2)
        }
    }

    /// The ok line of one good file (a scenario or a profile).
    private static func check(_ file: String) throws(ConfigError) -> String {
        if ScenarioDecoder.isScenarioFile(atPath: file) {
            let scenario = try ScenarioDecoder.decodeFile(atPath: file)
            let checks = "\(scenario.checks.count) check\(scenario.checks.count == 1 ? "" : "s")"
            return
                "ok: \(TerminalText.escaped(file)) (scenario \(scenario.name), profile \(scenario.profile.name), \(checks))"
        }
        let profile = try ProfileDecoder().decodeFile(atPath: file)
        return "ok: \(TerminalText.escaped(file)) (profile \(profile.name))"
    }
}
