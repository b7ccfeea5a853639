import CNetcondSystem
import Dispatch
import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A program netcond runs under emulated conditions.
///
/// Started by `netcond_spawn` (fork + exec, PATH searched like a shell) as the leader of a process
/// group of its own, with every signal at its default, descriptors 0, 1 and 2 and no other of
/// netcond's, and with PR_SET_PDEATHSIG so that it is killed if netcond itself dies, even by SIGKILL.
/// Signals go to its whole group (a shell's children are stopped with it), and when it ends,
/// whatever it left running in its group (a shell's background jobs) is killed: nothing of the group
/// outlives it. `wait()` blocks a dedicated thread in `waitpid`, never the event loops.
///
/// A child that shares netcond's stdin, stdout and stderr (no `output` given) is a job on netcond's
/// terminal: when netcond is in the foreground of its controlling terminal the child's group is
/// given the terminal (so Ctrl-C and Ctrl-Z reach it, and it can read the terminal), netcond follows
/// its stops (a stopped child stops netcond, so the shell sees the job stopped; `fg` or `bg`
/// continues both, the child with the terminal again when netcond has it), and netcond takes the
/// terminal back when the child ends.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    public let command: [String]

    /// Signals netcond passes on to the child.
    public static let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    private let reaper: Reaper

    private init(pid: pid_t, command: [String], reaper: Reaper) {
        self.pid = pid
        self.command = command
        self.reaper = reaper
    }

    /// Starts `command[0]` with its arguments. Throws `.notFound` (the shell's 127) or
    /// `.notExecutable` (126) with a message naming the program. With `output`, the child's stdout
    /// and stderr go to those descriptors and its stdin is /dev/null; without, it shares netcond's
    /// and, when netcond is in the foreground of a terminal, is given the terminal (see above). With
    /// `cgroup` (an open `cgroup.procs`), the child enters that cgroup before it executes; with
    /// `hostsFile` (`resolvFile`), it sees that file as /etc/hosts (/etc/resolv.conf: a mount namespace
    /// of its own); with `identity`, it runs as that user (netcond is root). `onExit` is called once it has ended, while it and its
    /// group are still as it left them (unreaped, not yet killed).
    public static func spawn(
        _ command: [String],
        environment: [String: String],
        workingDirectory: String? = nil,
        output: (stdout: Int32, stderr: Int32)? = nil,
        cgroup: Int32? = nil,
        hostsFile: String? = nil,
        resolvFile: String? = nil,
        identity: ChildIdentity? = nil,
        onExit: (@Sendable (pid_t) -> Void)? = nil
    ) throws(ChildProcessError) -> ChildProcess {
        try Self.checkStartable(command, environment: environment)
        let program = command[0]
        let resolved = Self.resolve(program, searchPath: Self.searchPath(environment)) ?? program
        let environmentLines = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        // The parent-death signal fires when the *thread* that forked ends, so the fork happens on a
        // thread of its own that lives exactly as long as the child (it waits for it).
        let reaper = Reaper(
            path: resolved, arguments: command, environment: environmentLines, directory: workingDirectory,
            output: output, cgroup: cgroup ?? -1, names: (hostsFile, resolvFile), identity: identity, onExit: onExit)
        let (result, step) = reaper.start()
        guard result == 0 else {
            let reason = String(cString: strerror(result))
            let user = identity.map { " as user \($0.name)" } ?? ""
            switch Int(step) {
            case Int(NETCOND_SPAWN_DIRECTORY):
                throw .spawnFailed(program, "cannot enter \(workingDirectory ?? "its folder")\(user): \(reason)")
            case Int(NETCOND_SPAWN_EXEC): throw .spawnFailed(program, reason + user)
            case Int(NETCOND_SPAWN_CGROUP):
                throw .spawnFailed(program, "cannot move it into the link's cgroup: \(reason)")
            case Int(NETCOND_SPAWN_NAMES):
                throw .spawnFailed(
                    program,
                    "cannot give it netcond's /etc/hosts and /etc/resolv.conf (a mount namespace of its own, "
                        + "which needs CAP_SYS_ADMIN): \(reason)")
            case Int(NETCOND_SPAWN_IDENTITY):
                throw .spawnFailed(program, "cannot take on the identity\(user): \(reason)")
            default: throw .spawnFailed(program, reason)
            }
        }
        return ChildProcess(pid: reaper.pid, command: command, reaper: reaper)
    }

    /// Throws what ``spawn(_:environment:workingDirectory:output:)`` would for a program that cannot
    /// start (not found: 127, not executable: 126), without starting anything.
    public static func checkStartable(_ command: [String], environment: [String: String]) throws(ChildProcessError) {
        guard let program = command.first, !program.isEmpty else { throw .noCommand }
        try Self.check(program, searchPath: Self.searchPath(environment))
    }

    private static func searchPath(_ environment: [String: String]) -> String {
        environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    }

    /// Sends a signal to the child's process group (which may outlive the child itself for a moment:
    /// a shell's background jobs). Returns false, and sends nothing, once the child has ended: its
    /// group was killed then, and its number may since belong to another.
    @discardableResult
    public func signal(_ signal: Int32) -> Bool {
        self.reaper.signalGroup(signal)
    }

    /// Waits for the child to end.
    public func wait() async -> ExitStatus {
        await withCheckedContinuation { continuation in
            self.reaper.whenExited { continuation.resume(returning: $0) }
        }
    }

    private static func check(_ program: String, searchPath: String) throws(ChildProcessError) {
        if program.contains("/") {
            guard access(program, F_OK) == 0 else { throw .notFound(program) }
            guard access(program, X_OK) == 0, !Self.isDirectory(program) else { throw .notExecutable(program) }
            return
        }
        guard Self.resolve(program, searchPath: searchPath) != nil else { throw .notFound(program) }
    }

    private static func resolve(_ program: String, searchPath: String) -> String? {
        if program.contains("/") { return program }
        for directory in searchPath.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
            if access(candidate, X_OK) == 0 && !Self.isDirectory(candidate) { return candidate }
        }
        return nil
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

/// How a child ended.
public enum ExitStatus: Equatable, Sendable {
    case exited(Int32)
    case signaled(Int32)

    /// The code a shell would report: the exit code, or 128 + N when killed by signal N.
    public var shellCode: Int32 {
        switch self {
        case .exited(let code): return code
        case .signaled(let signal): return 128 + signal
        }
    }
}

/// Why a child could not start.
public enum ChildProcessError: Error, Equatable, CustomStringConvertible {
    case noCommand
    case notFound(String)
    case notExecutable(String)
    case spawnFailed(String, String)

    /// What went wrong; a program name's control characters (a scenario file names it) escaped.
    public var description: String {
        switch self {
        case .noCommand: return "no command given after '--' (usage: netcond run PROFILE -- COMMAND [ARGS...])"
        case .notFound(let program): return "command not found: \(TerminalText.escaped(program))"
        case .notExecutable(let program):
            return "cannot execute \(TerminalText.escaped(program)): permission denied or not a file"
        case .spawnFailed(let program, let reason): return "cannot start \(TerminalText.escaped(program)): \(reason)"
        }
    }

    /// Exit code, as a shell would give.
    public var exitCode: Int32 {
        switch self {
        case .notFound: return 127
        case .notExecutable, .spawnFailed: return 126
        case .noCommand: return 2
        }
    }
}

/// The thread that starts one child, follows it (and, for a job on netcond's terminal, its stops)
/// and reaps it.
private final class Reaper: @unchecked Sendable {
    private let path: String
    private let arguments: [String]
    private let environment: [String]
    private let directory: String?
    private let output: (stdout: Int32, stderr: Int32)?
    private let cgroup: Int32
    /// The files the child sees as /etc/hosts and /etc/resolv.conf (nil: the machine's).
    private let names: (hosts: String?, resolv: String?)
    private let identity: ChildIdentity?
    private let onExit: (@Sendable (pid_t) -> Void)?
    private let started = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var startResult: (error: Int32, step: Int32) = (0, 0)
    private(set) var pid: pid_t = 0
    /// Set (under the lock) once the group has been killed; the leader is reaped only after, so a
    /// signal sent under the lock before it never reaches a reused group number.
    private var groupEnded = false
    private var status: ExitStatus?
    private var waiters: [@Sendable (ExitStatus) -> Void] = []
    /// netcond's controlling terminal, when the child is a job on it; else -1.
    private var terminal: Int32 = -1

    init(
        path: String, arguments: [String], environment: [String], directory: String?,
        output: (stdout: Int32, stderr: Int32)?, cgroup: Int32, names: (hosts: String?, resolv: String?),
        identity: ChildIdentity?,
        onExit: (@Sendable (pid_t) -> Void)?
    ) {
        self.onExit = onExit
        self.path = path
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.output = output
        self.cgroup = cgroup
        self.names = names
        self.identity = identity
    }

    /// Starts the thread and the child; returns 0 or an errno value, and the step that failed
    /// (NETCOND_SPAWN_*).
    func start() -> (error: Int32, step: Int32) {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self)
        let created = pthread_create(
            &thread, nil,
            { raw in
                let this = Unmanaged<Reaper>.fromOpaque(raw!).takeRetainedValue()
                this.run()
                return nil
            }, box.toOpaque())
        guard created == 0 else {
            box.release()
            return (created, Int32(NETCOND_SPAWN_SETUP))
        }
        pthread_detach(thread)
        self.started.wait()
        return self.startResult
    }

    func signalGroup(_ signal: Int32) -> Bool {
        self.lock.lock()
        defer { self.lock.unlock() }
        guard !self.groupEnded, self.pid > 0 else { return false }
        return kill(-self.pid, signal) == 0
    }

    func whenExited(_ callback: @escaping @Sendable (ExitStatus) -> Void) {
        self.lock.lock()
        if let status = self.status {
            self.lock.unlock()
            callback(status)
            return
        }
        self.waiters.append(callback)
        self.lock.unlock()
    }

    private func run() {
        // A job on netcond's controlling terminal: given the terminal when netcond is its foreground
        // group, and followed when it stops.
        var foreground = false
        if self.output == nil {
            let terminal = netcond_open_terminal()
            if terminal >= 0 {
                // netcond writes its log lines and summary from the background while the child has
                // the terminal: with `stty tostop`, SIGTTOU would stop it.
                signal(SIGTTOU, SIG_IGN)
                self.terminal = terminal
                foreground = netcond_terminal_foreground(terminal) == getpgrp()
            }
        }
        let argv = self.arguments.map { strdup($0) } + [nil]
        let envp = self.environment.map { strdup($0) } + [nil]
        var pid = pid_t()
        var step = Int32(NETCOND_SPAWN_SETUP)
        let groups = self.identity?.groups ?? []
        let result = groups.withUnsafeBufferPointer { buffer in
            var identity = netcond_identity(
                uid: self.identity?.uid ?? 0, gid: self.identity?.gid ?? 0, group_count: Int32(buffer.count),
                groups: buffer.baseAddress)
            return withUnsafePointer(to: &identity) { identityPointer in
                netcond_spawn(
                    self.path, argv, envp, self.directory, self.output?.stdout ?? -1, self.output?.stderr ?? -1,
                    foreground ? self.terminal : -1, self.cgroup, self.names.hosts, self.names.resolv,
                    self.identity == nil ? nil : identityPointer, &pid, &step)
            }
        }
        argv.forEach { free($0) }
        envp.forEach { free($0) }
        self.lock.lock()
        self.startResult = (result, step)
        self.pid = result == 0 ? pid : 0
        self.lock.unlock()
        self.started.signal()
        guard result == 0 else {
            self.releaseTerminal(child: pid)
            return
        }

        var status = ExitStatus.exited(127)
        while true {
            var kind: Int32 = 0
            var value: Int32 = 0
            guard netcond_wait_child(pid, self.terminal >= 0 ? 1 : 0, &kind, &value) == 0 else { break }
            if kind == Int32(NETCOND_CHILD_STOPPED) {
                self.followStop(child: pid, signal: value)
                continue
            }
            status = kind == Int32(NETCOND_CHILD_EXITED) ? .exited(value) : .signaled(value)
            break
        }
        self.onExit?(pid)
        // Whatever the child left running in its group ends with it. The leader is still unreaped,
        // so the group's number cannot have been reused yet.
        self.lock.lock()
        kill(-pid, SIGKILL)
        self.groupEnded = true
        self.lock.unlock()
        _ = netcond_reap_child(pid)
        self.releaseTerminal(child: pid)

        self.lock.lock()
        self.status = status
        let waiters = self.waiters
        self.waiters = []
        self.lock.unlock()
        for waiter in waiters { waiter(status) }
    }

    /// The child stopped (Ctrl-Z, a read from the terminal in the background, SIGSTOP): netcond stops
    /// too, with the same signal, so that the shell that started it sees the job stopped and takes
    /// the terminal. When netcond is continued (`fg`, `bg`) it gives the terminal back to the child
    /// if netcond has it (`fg`), and continues the child.
    ///
    /// An orphaned process group (no parent in the session to continue it) cannot be stopped by
    /// SIGTSTP, SIGTTIN or SIGTTOU; had the child been in netcond's, the kernel would have left it
    /// running, so it is continued at once; a stop in the background gets it SIGHUP first, as POSIX
    /// does to a stopped orphaned group (a read from the terminal that can never be answered).
    private func followStop(child: pid_t, signal: Int32) {
        if (signal == SIGTTIN || signal == SIGTTOU) && netcond_terminal_foreground(self.terminal) == getpgrp() {
            // netcond was brought to the foreground since the child started: the child may have it.
            _ = netcond_give_terminal(self.terminal, child)
            _ = self.signalGroup(SIGCONT)
            return
        }
        let hadTerminal = netcond_terminal_foreground(self.terminal) == child
        if hadTerminal {
            _ = netcond_give_terminal(self.terminal, getpgrp())
        }
        let stopped = (signal == SIGSTOP || !Self.groupIsOrphaned) && netcond_stop_self(signal) == 0
        if netcond_terminal_foreground(self.terminal) == getpgrp() {
            _ = netcond_give_terminal(self.terminal, child)
        } else if !stopped && !hadTerminal {
            _ = self.signalGroup(SIGHUP)
        }
        _ = self.signalGroup(SIGCONT)
    }

    /// netcond's process group is orphaned (POSIX): no member has a parent in another group of the
    /// same session. Only netcond's own parent is looked at, as a shell's job has it.
    private static var groupIsOrphaned: Bool {
        let parent = getppid()
        return !(getsid(parent) == getsid(0) && getpgid(parent) != getpgrp())
    }

    /// Takes the terminal back for netcond's own group, if the child's group (or a group of it that
    /// is gone) has it, and closes it. Not when the shell has it (netcond was sent to the background).
    private func releaseTerminal(child: pid_t) {
        guard self.terminal >= 0 else { return }
        let foreground = netcond_terminal_foreground(self.terminal)
        let gone = foreground > 0 && kill(-foreground, 0) != 0 && errno == ESRCH
        if foreground > 0 && foreground != getpgrp() && (foreground == child || gone) {
            _ = netcond_give_terminal(self.terminal, getpgrp())
        }
        close(self.terminal)
        self.terminal = -1
    }
}
