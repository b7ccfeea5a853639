#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A program netcond runs under emulated conditions.
///
/// Started with `posix_spawnp` (PATH search like a shell), in netcond's process group so that it
/// keeps the terminal, with the signals netcond catches reset to their defaults. `wait()` blocks a
/// dedicated thread in `waitpid`, never the event loops.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    public let command: [String]

    /// Signals netcond passes on to the child.
    public static let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    private init(pid: pid_t, command: [String]) {
        self.pid = pid
        self.command = command
    }

    /// Starts `command[0]` with its arguments. Throws `.notFound` (the shell's 127) or
    /// `.notExecutable` (126) with a message naming the program.
    public static func spawn(
        _ command: [String],
        environment: [String: String]
    ) throws(ChildProcessError) -> ChildProcess {
        guard let program = command.first, !program.isEmpty else { throw .noCommand }
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        try Self.check(program, searchPath: path)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in Self.forwardedSignals + [SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }

        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid = pid_t()
        // posix_spawnp searches PATH in the *parent's* environment; resolve it ourselves.
        let resolved = Self.resolve(program, searchPath: path) ?? program
        let result = posix_spawn(&pid, resolved, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw .spawnFailed(program, String(cString: strerror(result)))
        }
        return ChildProcess(pid: pid, command: command)
    }

    /// Sends a signal to the child (ignored once it has been reaped).
    public func signal(_ signal: Int32) {
        kill(self.pid, signal)
    }

    /// Waits for the child to end.
    public func wait() async -> ExitStatus {
        let pid = self.pid
        return await withCheckedContinuation { continuation in
            let thread = WaitThread(pid: pid) { continuation.resume(returning: $0) }
            thread.start()
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

/// A thread that reaps one child.
private final class WaitThread: @unchecked Sendable {
    private let pid: pid_t
    private let done: @Sendable (ExitStatus) -> Void

    init(pid: pid_t, done: @escaping @Sendable (ExitStatus) -> Void) {
        self.pid = pid
        self.done = done
    }

    func start() {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self)
        pthread_create(&thread, nil, { raw in
            let this = Unmanaged<WaitThread>.fromOpaque(raw!).takeRetainedValue()
            this.run()
            return nil
        }, box.toOpaque())
        pthread_detach(thread)
    }

    private func run() {
        var status: Int32 = 0
        while true {
            let result = waitpid(self.pid, &status, 0)
            if result == self.pid { break }
            if result == -1 && errno == EINTR { continue }
            self.done(.exited(127))
            return
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros; decode the status word directly.
        let termSignal = status & 0x7f
        if termSignal == 0 {
            self.done(.exited((status >> 8) & 0xff))
        } else {
            self.done(.signaled(termSignal))
        }
    }
}
