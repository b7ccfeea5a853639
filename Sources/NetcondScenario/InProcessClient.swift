import Foundation
import NIOConcurrencyHelpers
import NetcondCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A scenario's client: a program netcond starts, or a function in this process (a Swift client
/// library's own test, through NetcondTesting).
public enum ScenarioClient: Sendable {
    case command([String])
    /// Runs in this process; returning is exit 0, throwing is exit 1 (the error on its stderr).
    case function(@Sendable (InProcessClientContext) async throws -> Void)
}

/// What a function client gets: what a program would find in its environment, with the URL to
/// fetch as one it can reach without a proxy.
public struct InProcessClientContext: Sendable {
    /// The environment a program would run with (proxy variables, `NETCOND_*`, the origin's CA).
    public let environment: [String: String]
    /// `NETCOND_URL`, with the built-in origin reached through a forward on loopback
    /// (`http://127.0.0.1:PORT/path`: through the same link, no proxy needed).
    public let url: URL?
    /// `NETCOND_OUTPUT`: where a download should be written.
    public let outputPath: String?
    /// `NETCOND_WORKDIR`: a fresh folder of the run's own.
    public let workingDirectory: String
    /// The built-in origin through the forward (`http://127.0.0.1:PORT`).
    public let originURL: URL
    let output: (stdout: Int32, stderr: Int32)

    /// A line of the client's output (the checks read it, as a program's stdout).
    public func log(_ line: String) {
        Self.emit(line, to: self.output.stdout)
    }

    /// A line on the client's stderr.
    public func logError(_ line: String) {
        Self.emit(line, to: self.output.stderr)
    }

    private static func emit(_ line: String, to descriptor: Int32) {
        let bytes = Array((line.hasSuffix("\n") ? line : line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            offset += written
        }
    }
}

/// A client the runner waits for and can stop: a ``ChildProcess``, or an ``InProcessClient``.
protocol RunningClient: Sendable {
    @discardableResult func signal(_ signal: Int32) -> Bool
    func wait() async -> ExitStatus
}

extension ChildProcess: RunningClient {}

/// A function client running as a task. SIGTERM cancels the task; SIGKILL (the deadline's grace
/// is over) also stops waiting for it: a function that ignores cancellation is left running, and
/// the run ends as if the client had been killed.
final class InProcessClient: RunningClient {
    private let task: Task<Void, Never>
    private let state = NIOLockedValueBox<(status: ExitStatus?, waiters: [CheckedContinuation<ExitStatus, Never>])>(
        (nil, []))

    init(_ function: @escaping @Sendable (InProcessClientContext) async throws -> Void, context: InProcessClientContext)
    {
        let state = self.state
        self.task = Task {
            let status: ExitStatus
            do {
                try await function(context)
                status = .exited(0)
            } catch {
                context.logError("\(error)")
                status = .exited(1)
            }
            close(context.output.stdout)
            close(context.output.stderr)
            Self.finish(state, status)
        }
    }

    private static func finish(
        _ state: NIOLockedValueBox<(status: ExitStatus?, waiters: [CheckedContinuation<ExitStatus, Never>])>,
        _ status: ExitStatus
    ) {
        let waiters = state.withLockedValue { value -> [CheckedContinuation<ExitStatus, Never>] in
            guard value.status == nil else { return [] }
            value.status = status
            defer { value.waiters = [] }
            return value.waiters
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    @discardableResult
    func signal(_ signal: Int32) -> Bool {
        guard self.state.withLockedValue({ $0.status == nil }) else { return false }
        self.task.cancel()
        if signal == SIGKILL { Self.finish(self.state, .signaled(SIGKILL)) }
        return true
    }

    func wait() async -> ExitStatus {
        await withCheckedContinuation { continuation in
            let done = self.state.withLockedValue { value -> ExitStatus? in
                if let status = value.status { return status }
                value.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}
