import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What runs leave in the firewall and the cgroup hierarchy, and how a run tells the live from the
/// dead: a live run holds an exclusive flock on its cgroup's folder, which every netcond sees in
/// whatever PID namespace it runs (a process id says nothing across namespaces: ten runs, each
/// under `unshare --pid`, are all process 1). Every look at a cgroup's lock happens under the
/// table's lock, under which a run makes and locks its cgroup: a cgroup is never seen unlocked
/// between the two.
extension PacketCage {
    /// The marker chain in the shared table saying that `family`'s mangle table was not there when
    /// a run started (its iptables rules made it): `made_ip_mangle`, `made_ip6_mangle`.
    static func madeMangleMarker(_ family: String) -> String { "made_\(family)_mangle" }

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

    /// Whether the run `id` is gone: nobody holds its cgroup's lock (a run without a cgroup has
    /// none). An id of digits alone names a run of an older netcond after its process id: a
    /// netcond process of that id (in this PID namespace) keeps it, whatever the lock says (such a
    /// run made its cgroup before locking it, outside the table's lock). Call with the table's
    /// lock held.
    static func isGone(runID id: Substring, root: String?) -> Bool {
        guard !id.isEmpty, id.allSatisfy({ $0.isASCII && $0.isHexDigit }) else { return false }
        if id.allSatisfy(\.isNumber) {
            guard let pid = pid_t(id), pid > 0 else { return false }
            if kill(pid, 0) == 0 || errno == EPERM {
                let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
                if comm.hasPrefix("netcond") { return false }
            }
        }
        guard let root else { return true }
        return !Self.isHeld(root + "/" + Self.prefix + id)
    }

    /// Removes what runs that are gone left behind (a netcond killed by SIGKILL): their iptables
    /// rules, their chains in the shared table (and the table, when no run is left), tables of
    /// their own (as netcond made them before the shared table), and their cgroups, killing what
    /// still runs in them. A live run's, in any PID namespace, is never touched. Returns how many
    /// runs' things it removed.
    @discardableResult
    public static func removeStale() -> Int {
        (try? Self.withTableLock { () throws(PacketEngineError) in Self.removeStaleLocked() }) ?? 0
    }

    private static func removeStaleLocked() -> Int {
        let root = Self.cgroup2Root()
        var verdicts: [Substring: Bool] = [:]
        func isGone(_ id: Substring) -> Bool {
            if let known = verdicts[id] { return known }
            let gone = Self.isGone(runID: id, root: root)
            verdicts[id] = gone
            return gone
        }
        var removed = Set<Substring>()
        // The rules that send the marks to the queues first, then the chains that set the marks.
        for tool in ["iptables", "ip6tables"] {
            guard let listing = try? Self.run(tool, ["-w", "5", "-t", "mangle", "-S"]) else { continue }
            for line in listing.split(separator: "\n")
            where line.hasPrefix("-A ") && line.contains("--comment " + Self.prefix) {
                let words = line.split(separator: " ").map(String.init)
                guard let index = words.firstIndex(of: "--comment"), index + 1 < words.count else { continue }
                let comment = Substring(words[index + 1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
                guard comment.hasPrefix(Self.prefix) else { continue }
                let id = comment.dropFirst(Self.prefix.count)
                guard isGone(id) else { continue }
                _ = try? Self.run(tool, ["-w", "5", "-t", "mangle", "-D"] + words.dropFirst())
                removed.insert(id)
            }
        }
        for id in Self.removeRuns(where: { isGone(Substring($0)) }) { removed.insert(Substring(id)) }
        if let tables = try? Self.run("nft", ["list", "tables"]) {
            for line in tables.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count == 3, fields[1] == "inet", fields[2].hasPrefix("netcond_") else { continue }
                let id = fields[2].dropFirst("netcond_".count)
                guard isGone(id) else { continue }
                _ = try? Self.run("nft", ["delete", "table", "inet", String(fields[2])])
                removed.insert(id)
            }
        }
        if let root, let entries = try? FileManager.default.contentsOfDirectory(atPath: root) {
            for entry in entries where entry.hasPrefix(Self.prefix) {
                let id = Substring(entry).dropFirst(Self.prefix.count)
                guard isGone(id) else { continue }
                Self.removeCgroup(root + "/" + entry)
                removed.insert(id)
            }
        }
        return removed.count
    }

    /// Removes the chains of the runs `matches` names (by id) and the rules leading to them, and,
    /// when no run is left in the shared table, the table and the mangle tables netcond's rules
    /// made (``removeMangleTables(markedIn:)``). Call with the table lock held. Returns the runs it
    /// removed.
    @discardableResult
    static func removeRuns(where matches: (String) -> Bool) -> Set<String> {
        guard let listing = try? Self.run("nft", ["-a", "list", "table", "inet", Self.table]) else { return [] }
        var script = ""
        var chains: [String] = []
        var sets: [String] = []
        var removedRuns = Set<String>()
        var runsLeft = Set<String>()
        var chain = ""
        for line in listing.split(separator: "\n") {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("set run_") {
                // A run's passing set (``passInKernel(_:)``): it goes after the chains that look it up.
                let set = String(text.dropFirst("set ".count).prefix { $0 != " " })
                if matches(Self.runID(ofName: set)) { sets.append(set) }
                continue
            }
            if text.hasPrefix("chain ") {
                chain = String(text.dropFirst("chain ".count).prefix { $0 != " " })
                if chain.hasPrefix("run_") {
                    let id = Self.runID(ofName: chain)
                    if matches(id) {
                        chains.append(chain)
                        removedRuns.insert(id)
                    } else {
                        runsLeft.insert(id)
                    }
                }
                continue
            }
            guard let range = text.range(of: "comment \"" + Self.prefix),
                let handle = text.range(of: "# handle ").map({ text[$0.upperBound...] })
            else { continue }
            let id = String(text[range.upperBound...].prefix { $0 != "\"" })
            if matches(id) { script += "delete rule inet \(Self.table) \(chain) handle \(handle)\n" }
        }
        // The chains that jump or go to others first, then the link's.
        let leading = ["_output", "_input", "_captive"]
        let leads = { (chain: String) in leading.contains { chain.hasSuffix($0) } }
        for chain in chains.filter(leads) + chains.filter({ !leads($0) }) {
            script += "delete chain inet \(Self.table) \(chain)\n"
        }
        for set in sets { script += "delete set inet \(Self.table) \(set)\n" }
        if !script.isEmpty { _ = try? Self.run("nft", ["-f", "-"], input: script) }
        if runsLeft.isEmpty {
            // No run holds packets now, and none has rules in the mangle tables (a run adds its
            // chains before its rules and removes them after): the base chains can go (their
            // removal flushes the queues), and the mangle tables the runs' rules made.
            Self.removeMangleTables(markedIn: listing)
            _ = try? Self.run("nft", ["delete", "table", "inet", Self.table])
        }
        return removedRuns
    }

    /// The run id in the name of a run's chain or set (`run_ID_output`: ID).
    static func runID(ofName name: String) -> String { String(name.dropFirst(4).prefix { $0 != "_" }) }

    /// iptables-nft makes the `ip mangle` and `ip6 mangle` tables for a run's NFQUEUE rules and
    /// leaves them, empty, when the rules go. Removes each one a run saw missing as it started (its
    /// marker chain in the shared `listing`) when nothing is left in it but empty built-in chains:
    /// a table another program made before, or in which it has a rule or a chain of its own, stays.
    /// (The kernel removes a table whole, whatever is in it: what another program adds between the
    /// look and the removal, one nft call apart, would go with it. netcond's own runs cannot: a run
    /// adds its chains, under the lock held here, before its rules.)
    static func removeMangleTables(markedIn listing: String) {
        for family in ["ip", "ip6"] where listing.contains("chain \(Self.madeMangleMarker(family)) ") {
            guard let mangle = try? Self.run("nft", ["list", "table", family, "mangle"]),
                Self.isEmptyBuiltinTable(mangle)
            else { continue }
            _ = try? Self.run("nft", ["delete", "table", family, "mangle"])
        }
    }

    /// Whether a table's listing holds only iptables' built-in chains, each with no rule and policy
    /// accept (false when anything else is in it: a rule, a chain or set of its own, a policy drop).
    static func isEmptyBuiltinTable(_ listing: String) -> Bool {
        let builtin: Set<String> = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"]
        var depth = 0
        var tables = 0
        for raw in listing.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            switch depth {
            case 0:
                guard line.hasPrefix("table ") && line.hasSuffix(" {") else { return false }
                depth = 1
                tables += 1
            case 1:
                if line == "}" {
                    depth = 0
                } else if line.hasPrefix("chain ") && line.hasSuffix(" {"),
                    builtin.contains(String(line.dropFirst("chain ".count).dropLast(2)))
                {
                    depth = 2
                } else {
                    return false
                }
            default:
                if line == "}" {
                    depth = 1
                } else if !(line.hasPrefix("type ") && line.hasSuffix("; policy accept;")) {
                    return false
                }
            }
        }
        return depth == 0 && tables == 1
    }
}
