import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Notices a command run as root (no `--user`) slipping past the link: a process of the cage that
/// moved itself out of its cgroup (its sockets' packets then bypass the link), or a change to the
/// firewall rules that send the cage's packets to the link.
///
/// A process is followed from the moment it is seen in the cgroup (the command itself from its
/// spawn): one that is no longer listed there while it still lives, the same process (its start
/// time), in a cgroup outside the cage, has left it. The cgroup is read every ``interval``; a
/// process born and moved out between two reads is missed, and so are changes that leave the
/// run's own rules as they were (a rule of higher priority elsewhere), which is why the README
/// says to give `--user` to a command that is not trusted. What it finds is said; the processes
/// that left are ended with the run (``killEscaped()``), and only those: a process counts as one
/// only when its start time, read before and after its cgroup, is the one it had in the cage.
public final class CageWatch: @unchecked Sendable {
    /// One process that left, or one change to the rules.
    public struct Breach: Sendable, Equatable, CustomStringConvertible {
        /// Seconds since the watch started.
        public var at: Double
        public var description: String
    }

    static let interval: useconds_t = 20_000

    private let cage: PacketCage
    private let lock = NSLock()
    /// Processes seen in the cage, with their start times (in clock ticks since boot).
    private var members: [pid_t: UInt64] = [:]
    private var breaches: [Breach] = []
    /// Processes that left the cage, with their start times: netcond ends them with the run.
    private var escaped: [pid_t: UInt64] = [:]
    private var stopped = false
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)
    /// The run's own rules at the start (nil: the firewall could not be listed then).
    private let rulesAtStart: [String]?
    private let started = DispatchTime.now()

    /// Starts watching the cage (its rules as they are now are the run's own).
    public init(cage: PacketCage) {
        self.cage = cage
        self.rulesAtStart = cage.ownRules()
        let thread = Thread { [unowned self] in
            while !self.isStopped {
                self.poll()
                usleep(Self.interval)
            }
            self.done.signal()
        }
        thread.name = "netcond cage watch"
        self.thread = thread
        thread.start()
    }

    private var isStopped: Bool {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.stopped
    }

    /// Follows a process the run started in the cage, if it is there now (one that has already
    /// ended, or left, is seen when it ends: ``ended(_:)``).
    public func follow(_ pid: pid_t) {
        guard let start = self.startInCage(pid) else { return }
        self.lock.lock()
        self.members[pid] = start
        self.lock.unlock()
    }

    /// The start time of `pid` when it is in the cage now (read before and after its cgroup, so
    /// that it is that process's, not a reused number's).
    private func startInCage(_ pid: pid_t) -> UInt64? {
        guard let start = Self.startTime(pid), let place = Self.cgroup(of: pid), self.isInCage(place),
            Self.startTime(pid) == start
        else { return nil }
        return start
    }

    private func isInCage(_ place: String) -> Bool {
        let cage = "/" + self.cage.name
        return place == cage || place.hasPrefix(cage + "/")
    }

    /// The command `leader` has ended (unreaped, its group not yet killed): where it was then, and
    /// where each process of its group is. A process that left and ended between two reads of the
    /// cgroup, or one born outside it, is seen here.
    public func ended(_ leader: pid_t) {
        var group: [pid_t] = [leader]
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") {
            for entry in entries {
                guard let pid = pid_t(entry), pid != leader, Self.processGroup(pid) == leader else { continue }
                group.append(pid)
            }
        }
        for pid in group { self.check(pid) }
    }

    /// Stops watching and says what was found: the processes that left, then whether the rules
    /// changed. Call it before the cage is removed (its rules go with it). Safe to call twice.
    public func finish() -> [Breach] {
        self.lock.lock()
        let already = self.stopped
        self.stopped = true
        self.lock.unlock()
        if !already {
            self.done.wait()
            self.poll()
            // A listing that failed (the xtables lock busy with other runs' changes) says nothing.
            if let before = self.rulesAtStart, let now = self.cage.ownRules(), now != before {
                let gone = before.filter { !now.contains($0) }
                let what =
                    gone.isEmpty
                    ? "rules were added to its chains"
                    : "\(gone.count) of its \(before.count) rules are gone or changed (first: \(gone[0]))"
                self.record(
                    "the firewall rules that send the command's packets to the link were changed during the run: \(what)"
                )
            }
        }
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.breaches
    }

    private func record(_ text: String) {
        let at = Double(DispatchTime.now().uptimeNanoseconds - self.started.uptimeNanoseconds) / 1e9
        self.lock.lock()
        if self.breaches.count < 20 { self.breaches.append(Breach(at: (at * 100).rounded() / 100, description: text)) }
        self.lock.unlock()
    }

    private func poll() {
        let listed = Set(self.cage.processes)
        self.lock.lock()
        let known = self.members
        self.lock.unlock()
        var joined: [pid_t: UInt64] = [:]
        for pid in listed where known[pid] == nil && pid > 0 {
            if let start = self.startInCage(pid) { joined[pid] = start }
        }
        var departed: [pid_t] = []
        for (pid, start) in known where !listed.contains(pid) {
            departed.append(pid)
            // Gone from the cgroup: ended (or a new process under the same number), or moved. A
            // zombie still says which cgroup it died in.
            self.check(pid, started: start)
        }
        // Changes only: a process `follow` added meanwhile stays.
        self.lock.lock()
        for pid in departed { self.members[pid] = nil }
        self.members.merge(joined) { old, _ in old }
        self.lock.unlock()
    }

    /// Records `pid` (once) when it is outside the cage, and is the process that started at
    /// `started` (when given): its start time read before and after its cgroup.
    private func check(_ pid: pid_t, started: UInt64? = nil) {
        guard let start = Self.startTime(pid, zombie: true), started == nil || started == start,
            let place = Self.cgroup(of: pid), Self.startTime(pid, zombie: true) == start
        else { return }
        if self.isInCage(place) { return }
        self.lock.lock()
        let seen = self.escaped[pid] == start
        self.escaped[pid] = start
        self.lock.unlock()
        if seen { return }
        let command = ((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        self.record(
            "process \(pid) (\(command)) left the link's cgroup for \(place): its packets from then on bypassed the link"
        )
    }

    /// Kills the processes that left the cage, if they still run (the same processes: their start
    /// times), as the cage's own are killed: a run leaves nothing running.
    public func killEscaped() {
        self.lock.lock()
        let escaped = self.escaped
        self.lock.unlock()
        for (pid, start) in escaped where pid > 0 && Self.startTime(pid, zombie: true) == start {
            kill(pid, SIGKILL)
        }
    }

    /// A live process's start time (field 22 of /proc/PID/stat); nil when it is gone, or (unless
    /// `zombie`) has ended unreaped.
    static func startTime(_ pid: pid_t, zombie: Bool = false) -> UInt64? {
        guard let fields = Self.statFields(pid), fields.count > 19 else { return nil }
        // fields[0] is the state (field 3); the start time is field 22.
        if !zombie && (fields[0] == "Z" || fields[0] == "X") { return nil }
        return UInt64(fields[19])
    }

    /// A process's group (field 5 of /proc/PID/stat).
    static func processGroup(_ pid: pid_t) -> pid_t? {
        guard let fields = Self.statFields(pid), fields.count > 2 else { return nil }
        return pid_t(fields[2])
    }

    /// The fields of /proc/PID/stat after the command's name (field 3 on).
    private static func statFields(_ pid: pid_t) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// The cgroup2 path of a process (`0::/path` in /proc/PID/cgroup).
    static func cgroup(of pid: pid_t) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            return String(line.dropFirst(3))
        }
        return nil
    }
}
