import CNetcondSystem
import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A program netcond runs under emulated conditions.
///
/// Started by `netcond_spawn` (fork + exec, PATH searched like a shell) in netcond's process group so
/// that it keeps the terminal, with every signal at its default, and with PR_SET_PDEATHSIG so that it
/// is killed if netcond itself dies, even by SIGKILL: no orphan is ever left. `wait()` blocks a
/// dedicated thread in `waitpid`, never the event loops.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    public let command: [String]
    /// The child leads a process group of its own (its output is captured): signals go to the group,
    /// so a shell's children are stopped with it.
    public let ownsGroup: Bool

    /// Signals netcond passes on to the child.
    public static let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    private let reaper: Reaper

    private init(pid: pid_t, command: [String], ownsGroup: Bool, reaper: Reaper) {
        self.pid = pid
        self.command = command
        self.ownsGroup = ownsGroup
        self.reaper = reaper
    }

    /// Starts `command[0]` with its arguments. Throws `.notFound` (the shell's 127) or
    /// `.notExecutable` (126) with a message naming the program. With `output`, the child's stdout
    /// and stderr go to those descriptors, its stdin is /dev/null, and it leads a process group of
    /// its own (it has no terminal to share).
    public static func spawn(
        _ command: [String],
        environment: [String: String],
        workingDirectory: String? = nil,
        output: (stdout: Int32, stderr: Int32)? = nil
    ) throws(ChildProcessError) -> ChildProcess {
        try Self.checkStartable(command, environment: environment)
        let program = command[0]
        let resolved = Self.resolve(program, searchPath: Self.searchPath(environment)) ?? program
        let environmentLines = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        // The parent-death signal fires when the *thread* that forked ends, so the fork happens on a
        // thread of its own that lives exactly as long as the child (it waits for it).
        let reaper = Reaper(
            path: resolved, arguments: command, environment: environmentLines, directory: workingDirectory,
            output: output)
        let result = reaper.start()
        guard result == 0 else {
            if let workingDirectory, result == ENOENT || result == ENOTDIR || result == EACCES {
                throw .spawnFailed(program, "cannot enter \(workingDirectory): \(String(cString: strerror(result)))")
            }
            throw .spawnFailed(program, String(cString: strerror(result)))
        }
        return ChildProcess(pid: reaper.pid, command: command, ownsGroup: output != nil, reaper: reaper)
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

    /// Sends a signal to the child, or to its process group when it has one of its own (which may
    /// outlive the child itself: a shell's background jobs). Not sent to a reaped child that led no group.
    public func signal(_ signal: Int32) {
        if self.ownsGroup {
            kill(-self.pid, signal)
        } else if !self.reaper.hasExited {
            kill(self.pid, signal)
        }
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

    public var description: String {
        switch self {
        case .noCommand: return "no command given after '--' (usage: netcond run PROFILE -- COMMAND [ARGS...])"
        case .notFound(let program): return "command not found: \(program)"
        case .notExecutable(let program): return "cannot execute \(program): permission denied or not a file"
        case .spawnFailed(let program, let reason): return "cannot start \(program): \(reason)"
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

/// The thread that starts one child and reaps it.
private final class Reaper: @unchecked Sendable {
    private let path: String
    private let arguments: [String]
    private let environment: [String]
    private let directory: String?
    private let output: (stdout: Int32, stderr: Int32)?
    private let started = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var startResult: Int32 = 0
    private(set) var pid: pid_t = 0
    private var status: ExitStatus?
    private var waiters: [@Sendable (ExitStatus) -> Void] = []

    init(path: String, arguments: [String], environment: [String], directory: String?, output: (stdout: Int32, stderr: Int32)?) {
        self.path = path
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.output = output
    }

    /// Starts the thread and the child; returns 0 or an errno value.
    func start() -> Int32 {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self)
        let created = pthread_create(&thread, nil, { raw in
            let this = Unmanaged<Reaper>.fromOpaque(raw!).takeRetainedValue()
            this.run()
            return nil
        }, box.toOpaque())
        guard created == 0 else {
            box.release()
            return created
        }
        pthread_detach(thread)
        self.started.wait()
        return self.startResult
    }

    var hasExited: Bool {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.status != nil
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
        let argv = self.arguments.map { strdup($0) } + [nil]
        let envp = self.environment.map { strdup($0) } + [nil]
        var pid = pid_t()
        self.startResult = netcond_spawn(
            self.path, argv, envp, self.directory, self.output?.stdout ?? -1, self.output?.stderr ?? -1, &pid)
        argv.forEach { free($0) }
        envp.forEach { free($0) }
        self.pid = pid
        self.started.signal()
        guard self.startResult == 0 else { return }

        var raw: Int32 = 0
        var status = ExitStatus.exited(127)
        while true {
            let result = waitpid(pid, &raw, 0)
            if result == pid {
                // WIFEXITED / WEXITSTATUS / WTERMSIG are macros; decode the status word directly.
                let signal = raw & 0x7f
                status = signal == 0 ? .exited((raw >> 8) & 0xff) : .signaled(signal)
                break
            }
            if result == -1 && errno == EINTR { continue }
            break
        }
        self.lock.lock()
        self.status = status
        let waiters = self.waiters
        self.waiters = []
        self.lock.unlock()
        for waiter in waiters { waiter(status) }
    }
}
