import ArgumentParser
import Foundation
import NetcondCore
import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

@main
struct Netcond: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netcond",
        abstract: "Run programs under emulated network conditions and check how they behave.",
        discussion: """
            Examples:
              # EDGE against the built-in origin, no internet needed
              netcond demo
              # a program under conditions
              netcond run edge -- curl -o x http://origin.netcond.test/bytes/200KB
              netcond run Profiles/3g.yaml -- python3 client.py
              # a verdict on a client; every scenario, for CI
              netcond run Scenarios/resume-after-dropout.yaml -- ./client
              netcond test Scenarios/ --junit report.xml -- ./client
              # manual throttling while developing, changed live
              netcond proxy lte --listen 127.0.0.1:8080
              netcond ctl outage refuse
              # the built-in profiles; a trace and a profile from a capture
              netcond profiles
              netcond trace record train.pcap
            """,
        version: "0.1.0 (git \(buildRevision))",
        subcommands: [
            RunCommand.self, TestCommand.self, ProxyCommand.self, CtlCommand.self, ProfilesCommand.self,
            ValidateCommand.self, DemoCommand.self,
            FetchCommand.self, ReportCommand.self, ToxiproxyCommand.self, TraceCommand.self,
        ]
    )

    /// Usage errors exit 2 (not ArgumentParser's 64), as documented.
    static func main() async {
        let given = Array(CommandLine.arguments.dropFirst())
        var arguments = Self.optionsAfterSubcommands(given, of: Self.self)
        // An option's value that is also a subcommand's name (`--control run`): read as the
        // subcommand, the words do not parse; read as the value, they may.
        let asValues = Self.optionsAfterSubcommands(given, of: Self.self, namesAsValues: true)
        if asValues != arguments, (try? Self.parseAsRoot(arguments)) == nil, (try? Self.parseAsRoot(asValues)) != nil {
            arguments = asValues
        }
        if arguments.first == TestCommand.configuration.commandName, let terminator = arguments.firstIndex(of: "--") {
            TestCommand.passthrough = Array(arguments[(terminator + 1)...])
            arguments = Array(arguments[..<terminator])
        }
        do {
            var command = try Self.parseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = Self.exitCode(for: error)
            if code == .validationFailure {
                printError(Self.fullMessage(for: error))
                Glibc.exit(2)
            }
            Self.exit(withError: error)
        }
    }

    /// Options may come before a subcommand as well as after it: `netcond ctl --control URL status`
    /// is `netcond ctl status --control URL`, `netcond --seed 3 run edge` is `netcond run --seed 3
    /// edge`. Options between a command and its subcommand's name move to just after that name (an
    /// option's value is the word after it unless that word is an option or a subcommand's name).
    /// Nothing after the subcommand's name moves, so a `-- COMMAND` is left as it is.
    /// `namesAsValues`: a word after an option that is a subcommand's name is taken as the
    /// option's value.
    static func optionsAfterSubcommands(
        _ arguments: [String], of command: any ParsableCommand.Type, namesAsValues: Bool = false
    ) -> [String] {
        let subcommands = command.configuration.subcommands
        // `---completion …`: the completion script's call into ArgumentParser, in its own order.
        guard !subcommands.isEmpty, !arguments.contains(where: { $0.hasPrefix("---") }) else { return arguments }
        let names = subcommands.map { $0._commandName }
        var index = 0
        var moved: [String] = []
        while index < arguments.count, arguments[index].hasPrefix("-"), arguments[index] != "--" {
            moved.append(arguments[index])
            let next = index + 1
            if !arguments[index].contains("="), next < arguments.count, !arguments[next].hasPrefix("-"),
                namesAsValues || !names.contains(arguments[next])
            {
                moved.append(arguments[next])
                index += 2
            } else {
                index += 1
            }
        }
        guard index < arguments.count,
            let subcommand = subcommands.first(where: { $0._commandName == arguments[index] })
        else {
            return arguments
        }
        let rest = Self.optionsAfterSubcommands(
            Array(arguments[(index + 1)...]), of: subcommand, namesAsValues: namesAsValues)
        return [arguments[index]] + moved + rest
    }
}

/// Shell completion for a profile argument: the built-in names, and the YAML files the word being
/// completed names (`Profiles/<TAB>`).
let profileCompletion = CompletionKind.custom { _, _, prefix in
    profileCompletions(for: prefix)
}

/// The built-in names and the YAML files (and folders) that complete `prefix`. Any word a shell
/// may pass (empty, one letter, `~`, `/`, a name that is not UTF-8) gives a list, never a trap: the
/// folder is the text up to its last `/`, read as given (`~/` as the home folder).
func profileCompletions(for prefix: String) -> [String] {
    let names = ProfileCatalog.knownNames.filter { $0.hasPrefix(prefix) }
    let directory = prefix.lastIndex(of: "/").map { String(prefix[...$0]) } ?? ""
    var onDisk = directory.isEmpty ? "." : directory
    if onDisk.hasPrefix("~/"), let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty {
        onDisk = home + onDisk.dropFirst()
    }
    let listed = (try? FileManager.default.contentsOfDirectory(atPath: onDisk)) ?? []
    let files = listed.sorted().filter { name in
        guard (directory + name).hasPrefix(prefix) else { return false }
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(
            atPath: onDisk + (onDisk.hasSuffix("/") ? "" : "/") + name, isDirectory: &isDirectory)
        return name.hasSuffix(".yaml") || name.hasSuffix(".yml") || isDirectory.boolValue
    }.map { directory + $0 }
    return names + files
}

/// Options every command that runs conditions takes.
struct SeedOption: ParsableArguments {
    @Option(name: .long, help: "Seed for loss and jitter decisions (default: $NETCOND_SEED, else random; printed).")
    var seed: UInt64?

    /// The seed to use: the flag, `NETCOND_SEED`, or a random one.
    func resolve() throws -> UInt64 {
        if let seed = self.seed { return seed }
        if let text = getenv("NETCOND_SEED").map({ String(cString: $0) }), !text.isEmpty {
            guard let seed = UInt64(text) else {
                throw ValidationError("NETCOND_SEED must be a whole number from 0 to \(UInt64.max), got '\(text)'")
            }
            return seed
        }
        return UInt64.random(in: 1...999_999)
    }
}

/// `--user`: the packet engine's command as another user than netcond (root).
struct UserOption: ParsableArguments {
    @Option(
        name: .long,
        help: """
            --engine packet, netcond as root: run the command as this user (a name or a numeric id), so that \
            it cannot leave the link's cgroup or change the firewall, and writes its files as that user; \
            e.g. sudo netcond run --engine packet --user "$USER" edge -- ./client.
            """
    )
    var user: String?

    /// The user to run the command as; nil without `--user`, or when it names netcond's own user
    /// (with `warn`, said on stderr when that is root: the command is not held in).
    func resolve(warn: Bool = false) throws -> ChildIdentity? {
        guard let text = self.user else { return nil }
        let identity: ChildIdentity
        do {
            identity = try ChildIdentity.resolve(text)
        } catch {
            throw ValidationError(error.description)
        }
        if identity.needsRoot {
            throw ValidationError("--user \(text): running the command as another user needs netcond to run as root")
        }
        if warn && identity.uid == 0 && geteuid() == 0 {
            printError(
                "netcond: --user \(text): that is root, so the command can still leave the link's cgroup or change the firewall"
            )
        }
        guard identity.uid != geteuid() else { return nil }
        // The files the command reads (the origin's CA bundle, a scenario's working folder) are made
        // in TMPDIR: a folder on the way that the user cannot enter would fail the command itself
        // (curl exit 77, exit 126 for a scenario's client), with nothing said.
        let base = TemporaryFiles.base
        if let closed = identity.closedFolder(on: base) {
            throw ValidationError(
                "--user \(text): user \(identity.name) cannot enter \(closed), on the way to TMPDIR (\(base)), where netcond "
                    + "puts the run's files the command reads (the origin's CA bundle, a scenario's working folder); set TMPDIR "
                    + "to a folder that user can enter (e.g. TMPDIR=/tmp), or let the user through that folder (chmod o+x)"
            )
        }
        return identity
    }

    /// Before a packet-engine run as root without `--user`: one line saying what that allows, and
    /// what prevents it.
    func warnIfUncaged() {
        guard self.user == nil, geteuid() == 0 else { return }
        printError(
            "netcond: the command runs as root: it can leave the link's cgroup or change the firewall, and its "
                + "packets then bypass the link (netcond says so if it notices); --user NAME runs it as NAME, held in")
    }
}

/// `--low-latency`: hold the CPUs out of deep idle states while netcond runs.
struct LowLatencyOption: ParsableArguments {
    @Flag(
        name: .long,
        help: """
            Keep the CPUs out of deep idle states while netcond runs (/dev/cpu_dma_latency, needs root): \
            removes the 0.1-0.5 ms each wake-up from idle costs on a VM or laptop, for sub-millisecond \
            latency accuracy. Idle CPUs poll meanwhile (through the kernel's cpuidle driver: netcond says when \
            the machine has none, as some virtual machines do, and the hold changes nothing).
            """
    )
    var lowLatency = false

    /// Takes the hold when asked; without it netcond still runs, with a warning saying why. A hold
    /// that changes nothing on this machine (no cpuidle driver) is kept, and said.
    func hold() -> CPULatencyHold? {
        guard self.lowLatency else { return nil }
        do {
            let hold = try CPULatencyHold()
            if let reason = CPUIdleDriver.current().withoutEffect {
                printError("netcond: --low-latency cannot keep idle CPUs polling: \(reason)")
            }
            return hold
        } catch {
            printError("netcond: --low-latency not in effect: \(error.description)")
            return nil
        }
    }
}

func printError(_ message: String) {
    writeStandardError(message.hasSuffix("\n") ? message : message + "\n")
}

/// Writes `text` to stderr as is, after whatever stdout holds.
func writeStandardError(_ text: String) {
    fflush(nil)
    text.withCString { pointer in _ = write(2, pointer, strlen(pointer)) }
}

/// Decodes with `body`; what it read written an older way (`first_byte:`) is noted on stderr with
/// the new spelling.
func decodingWithNotes<T>(_ body: () throws(ConfigError) -> T) throws(ConfigError) -> T {
    let (value, notices) = try ConfigNotices.collecting(body)
    for notice in notices { printError("netcond: \(TerminalText.escaped(notice.description))") }
    return value
}

/// Resolves a profile argument or exits 2 with the error.
func resolveProfile(_ nameOrPath: String) -> Profile {
    do {
        return try decodingWithNotes { () throws(ConfigError) in try ProfileCatalog.resolve(nameOrPath) }
    } catch {
        printError("netcond: \(error.description)")
        Glibc.exit(2)
    }
}

/// How a summary names the profile that ran: its name, and the file it came from when one was
/// given (a copied profile still calls itself `edge`: the path says which ran).
func profileLabel(_ argument: String, _ profile: Profile) -> String {
    ProfileCatalog.looksLikePath(argument) ? "\(profile.name) (\(TerminalText.escaped(argument)))" : profile.name
}

/// Refuses (exit 2) a report path whose folder does not exist, before anything runs.
func checkReportFolders(_ reports: [(option: String, path: String?)]) throws {
    for (option, path) in reports {
        guard let path else { continue }
        let directory = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !directory.isEmpty
            && !(FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue)
        {
            throw ValidationError("\(option) \(path): the folder \(directory) does not exist")
        }
    }
}

/// The HTML report of a JSON report this netcond just wrote (its own format, so it draws).
func htmlReport(_ json: String, connections: (graph: TimeSequence, capture: String, dropsKnown: Bool)? = nil) -> String
{
    do {
        return try HTMLReport.render(json: Data(json.utf8), source: "the run", connections: connections)
    } catch {
        preconditionFailure("a report this netcond wrote does not draw: \(error)")
    }
}

/// Writes each report asked for (a path, and its text made only then); exit 3 naming the file
/// that cannot be written.
func writeReports(_ reports: [(path: String?, text: () -> String)]) throws {
    for (path, text) in reports {
        guard let path else { continue }
        do {
            try text().write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            printError("netcond: cannot write the report \(path): \(error.localizedDescription)")
            throw ExitCode(3)
        }
    }
}
