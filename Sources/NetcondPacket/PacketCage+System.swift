import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The system around a cage: the table's lock, a cgroup's processes, what the firewall holds of
/// a run, and the firewall tools themselves.
extension PacketCage {
    /// Runs `body` holding the lock that orders changes to the shared table between runs (an
    /// exclusive flock on the cgroup hierarchy's root directory).
    @discardableResult
    static func withTableLock<T>(_ body: () throws(PacketEngineError) -> T) throws(PacketEngineError) -> T {
        let fd = open(Self.cgroup2Root() ?? "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            while flock(fd, LOCK_EX) != 0 && errno == EINTR {}
        }
        defer {
            if fd >= 0 {
                flock(fd, LOCK_UN)
                close(fd)
            }
        }
        return try body()
    }

    /// Kills every process of a cgroup (cgroup.kill, else SIGKILL one by one) and waits up to 2 s
    /// for them to go. A process of another PID namespace reads as 0 in cgroup.procs: never
    /// signalled (kill(0, …) is the caller's own process group).
    static func killAll(_ directory: String) {
        guard access(directory, F_OK) == 0 else { return }
        let killFile = directory + "/cgroup.kill"
        if access(killFile, W_OK) == 0 {
            try? "1".write(toFile: killFile, atomically: false, encoding: .utf8)
        }
        for _ in 0..<200 {
            let text = (try? String(contentsOfFile: directory + "/cgroup.procs", encoding: .utf8)) ?? ""
            let pids = text.split(separator: "\n").compactMap { pid_t($0) }
            if pids.isEmpty { break }
            for pid in pids where pid > 0 { kill(pid, SIGKILL) }
            usleep(10_000)
        }
    }

    /// Kills every process of a cgroup and removes it.
    static func removeCgroup(_ directory: String) {
        guard access(directory, F_OK) == 0 else { return }
        Self.killAll(directory)
        rmdir(directory)
    }

    /// Where the cgroup2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
    /// hybrid system), from /proc/self/mounts.
    static func cgroup2Root() -> String? {
        guard let mounts = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return nil }
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count >= 3 && fields[2] == "cgroup2" { return String(fields[1]) }
        }
        return nil
    }

    /// This run's own rules as the firewall holds them now: its chains' rules and the jumps to them
    /// in the shared table, and its iptables rules (other runs' rules are left out: they come and
    /// go). A table removed whole shows as a line saying so; nil when a tool could not list (the
    /// xtables lock held past its wait by other runs' changes): then nothing can be said.
    func ownRules() -> [String]? {
        var lines: [String] = []
        let listing: String
        do {
            listing = try Self.run("nft", ["list", "table", "inet", Self.table])
        } catch {
            // No table at all (flushed whole), or nft failed: which, its listing of tables says.
            guard let tables = try? Self.run("nft", ["list", "tables"]) else { return nil }
            listing = tables.contains("inet \(Self.table)") ? "" : "(no table inet \(Self.table))"
            if listing.isEmpty { return nil }
        }
        lines += listing.hasPrefix("(no table") ? [listing] : Self.ownLines(in: listing, chainPrefix: self.chainPrefix)
        for tool in ["iptables", "ip6tables"] {
            guard let rules = try? Self.run(tool, ["-w", "5", "-t", "mangle", "-S"]) else { return nil }
            lines += rules.split(separator: "\n").filter { $0.contains("--comment " + self.name + " ") }.map {
                "\(tool) \($0)"
            }
        }
        return lines
    }

    /// The lines of an nft listing that are this run's: every rule of its chains, and the rules
    /// elsewhere that lead to them, each with its chain's name. The captive portal's chain is left
    /// out: netcond fills and flushes it during the run (``setCaptive(_:)``), and so are the
    /// passing set's elements (``passInKernel(_:)``).
    static func ownLines(in listing: String, chainPrefix: String) -> [String] {
        var lines: [String] = []
        var chain = ""
        for raw in listing.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("chain ") && line.hasSuffix("{") {
                chain = String(line.dropFirst("chain ".count).dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            if line == "}" || line.isEmpty || line.hasPrefix("type ") || line.hasPrefix("elements = ")
                || chain == chainPrefix + "_captive"
            {
                continue
            }
            if chain.hasPrefix(chainPrefix + "_") || line.contains(chainPrefix + "_") {
                lines.append("nft \(chain): \(line)")
            }
        }
        return lines
    }

    /// Runs a system tool (nft, iptables) and returns its output; throws with its stderr.
    @discardableResult
    static func run(_ tool: String, _ arguments: [String], input: String? = nil) throws(PacketEngineError) -> String {
        guard let path = Self.locate(tool) else {
            throw .missingTool(tool)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let stdin = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : stdin
        do {
            try process.run()
        } catch {
            throw .system("cannot run \(path)", EIO)
        }
        if let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try? stdin.fileHandleForWriting.close()
        }
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errorData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw .toolFailed(tool + " " + arguments.joined(separator: " "), message)
        }
        return String(decoding: outputData, as: UTF8.self)
    }

    static func locate(_ tool: String) -> String? {
        for directory in ["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin"] {
            let candidate = directory + "/" + tool
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
