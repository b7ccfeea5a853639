import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What runs leave in the firewall and the cgroup hierarchy, and how a run tells the live from the
/// dead.
extension PacketCage {
    /// Opens `directory` and takes its exclusive flock without waiting: the descriptor, or -1 when a
    /// live run holds it (or it cannot be opened).
    static func lockLive(_ directory: String) -> Int32 {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return -1 }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    /// Whether a live run holds the cgroup `directory` (its flock), whatever PID namespace it is in.
    static func isHeld(_ directory: String) -> Bool {
        guard access(directory, F_OK) == 0 else { return false }
        let descriptor = Self.lockLive(directory)
        if descriptor >= 0 {
            close(descriptor)
            return false
        }
        return access(directory, F_OK) == 0
    }

    /// Removes what netcond processes that are gone left behind: cgroups, nft tables, iptables
    /// rules. Returns how many things it removed.
    @discardableResult
    public static func removeStale() -> Int {
        var removed = 0
        let root = Self.cgroup2Root()
        func isGone(_ name: Substring) -> Bool {
            guard let pid = pid_t(name.dropFirst(Self.prefix.count)), pid > 0 else { return false }
            if pid == getpid() { return false }
            // A run holds its cgroup's lock while it lives: a run in another PID namespace, whose
            // process id means nothing here, is alive while the lock is held.
            if let root, Self.isHeld(root + "/" + String(name)) { return false }
            if kill(pid, 0) == 0 || errno == EPERM {
                // Alive: but is it a netcond? A reused number belongs to something else.
                let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
                return !comm.hasPrefix("netcond")
            }
            return true
        }
        if let root, let entries = try? FileManager.default.contentsOfDirectory(atPath: root) {
            for entry in entries where entry.hasPrefix(Self.prefix) && isGone(Substring(entry)) {
                Self.removeCgroup(root + "/" + entry)
                removed += 1
            }
        }
        removed += (try? Self.withTableLock { () throws(PacketEngineError) in
            Self.removeRuns { isGone(Substring(Self.prefix + $0)) }
        }) ?? 0
        // Tables of their own, as netcond made them before the shared table.
        if let tables = try? Self.run("nft", ["list", "tables"]) {
            for line in tables.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count == 3, fields[1] == "inet", fields[2].hasPrefix("netcond_") else { continue }
                let name = Substring(Self.prefix + fields[2].dropFirst("netcond_".count))
                if isGone(name) {
                    _ = try? Self.run("nft", ["delete", "table", "inet", String(fields[2])])
                    removed += 1
                }
            }
        }
        for tool in ["iptables", "ip6tables"] {
            guard let listing = try? Self.run(tool, ["-w", "5", "-t", "mangle", "-S"]) else { continue }
            for line in listing.split(separator: "\n") where line.hasPrefix("-A ") && line.contains("--comment " + Self.prefix) {
                let words = line.split(separator: " ").map(String.init)
                guard let index = words.firstIndex(of: "--comment"), index + 1 < words.count,
                    isGone(Substring(words[index + 1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))))
                else { continue }
                _ = try? Self.run(tool, ["-w", "5", "-t", "mangle", "-D"] + words.dropFirst())
                removed += 1
            }
        }
        return removed
    }

    /// Removes the runs' chains and the rules leading to them (`pids`: whose), and the table when no
    /// run is left in it. Call with the table lock held. Returns how many runs it removed.
    @discardableResult
    static func removeRuns(where matches: (String) -> Bool) -> Int {
        guard let listing = try? Self.run("nft", ["-a", "list", "table", "inet", Self.table]) else { return 0 }
        var script = ""
        var chains: [String] = []
        var removedRuns = Set<String>()
        var runsLeft = Set<String>()
        var chain = ""
        for line in listing.split(separator: "\n") {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("chain ") {
                chain = String(text.dropFirst("chain ".count).prefix { $0 != " " })
                if chain.hasPrefix("run_") {
                    let pid = String(chain.dropFirst(4).prefix { $0 != "_" })
                    if matches(pid) {
                        chains.append(chain)
                        removedRuns.insert(pid)
                    } else {
                        runsLeft.insert(pid)
                    }
                }
                continue
            }
            guard let range = text.range(of: "comment \"" + Self.prefix),
                let handle = text.range(of: "# handle ").map({ text[$0.upperBound...] })
            else { continue }
            let pid = String(text[range.upperBound...].prefix { $0 != "\"" })
            if matches(pid) { script += "delete rule inet \(Self.table) \(chain) handle \(handle)\n" }
        }
        // The chains that jump or go to others first.
        let order = ["_output", "_input", "_captive", "_up", "_down"]
        for suffix in order {
            for chain in chains where chain.hasSuffix(suffix) { script += "delete chain inet \(Self.table) \(chain)\n" }
        }
        if !script.isEmpty { _ = try? Self.run("nft", ["-f", "-"], input: script) }
        if runsLeft.isEmpty {
            // No run holds packets now: the base chains can go (their removal flushes the queues).
            _ = try? Self.run("nft", ["delete", "table", "inet", Self.table])
        }
        return removedRuns.count
    }
}
