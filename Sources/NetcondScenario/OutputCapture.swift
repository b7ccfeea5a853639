import CNetcondSystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where a client's captured output is shown as well.
public enum OutputEcho: Sendable {
    case none
    /// To netcond's stdout (the client's stdout) and stderr (its stderr).
    case direct
    /// To a handler, with the descriptor the bytes would have gone to (1 or 2).
    case handler(@Sendable (_ descriptor: Int32, _ bytes: Data) -> Void)
}

/// A scenario client's stdout and stderr, read through two pipes by a thread of their own: both
/// go to a log file (interleaved as they come), and are echoed as ``OutputEcho`` says: not at all,
/// to netcond's own stdout and stderr (the person watching sees the client as if it wrote there
/// itself), or through a handler (one that keeps a status line out of the client's way). What the
/// checks need is kept: the lines with the moment each came, and the end of stderr.
public final class OutputCapture: @unchecked Sendable {
    /// The pipes' write ends, for the child (closed here once it has started).
    public let childStdout: Int32
    public let childStderr: Int32
    private let readStdout: Int32
    private let readStderr: Int32
    private let file: Int32
    private let echo: OutputEcho
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private var stderrTail: [UInt8] = []
    private var stopRequested = false
    private var lines: [Line] = []
    private var partial: [Int32: [UInt8]] = [:]

    /// One line the client printed, and when (uptime nanoseconds, the clock `NIODeadline` uses).
    public struct Line: Sendable, Equatable {
        public var uptimeNanoseconds: UInt64
        public var stderr: Bool
        public var text: String
    }

    /// Lines kept for the checks (the first ones; the log file has everything).
    public static let maxLines = 20_000
    /// Longer lines are cut here.
    public static let maxLineLength = 1_000

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// What was captured: the end of stderr and the timed lines.
    public struct Summary: Sendable, Equatable {
        /// The last lines the client wrote to stderr (at most ``ClientOutput/tailLimit`` bytes).
        public var stderrTail: String
        /// Every line (up to ``OutputCapture/maxLines``), with the moment it came.
        public var lines: [Line]
    }

    /// Opens `path` for the log (created or truncated) and the two pipes.
    public init(path: String, echo: OutputEcho) throws(Failure) {
        let file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard file >= 0 else {
            throw Failure(
                description: "cannot write the client's output to \(path): \(String(cString: strerror(errno)))")
        }
        var out: [Int32] = [0, 0]
        var err: [Int32] = [0, 0]
        let outError = netcond_pipe_cloexec(&out)
        guard outError == 0 else {
            close(file)
            throw Failure(description: "cannot make a pipe: \(String(cString: strerror(outError)))")
        }
        let errError = netcond_pipe_cloexec(&err)
        guard errError == 0 else {
            close(file)
            close(out[0])
            close(out[1])
            throw Failure(description: "cannot make a pipe: \(String(cString: strerror(errError)))")
        }
        self.file = file
        self.readStdout = out[0]
        self.childStdout = out[1]
        self.readStderr = err[0]
        self.childStderr = err[1]
        self.echo = echo
    }

    /// Call once the child has started (or failed to): closes the child's ends here and starts reading.
    public func start() {
        close(self.childStdout)
        close(self.childStderr)
        let thread = Thread { self.pump() }
        thread.name = "netcond client output"
        thread.start()
    }

    /// Waits for both streams to end (the client and everything it started closed them), at most
    /// `grace` seconds: a process the client left behind may hold them open forever.
    public func finish(grace: Double) -> Summary {
        if self.done.wait(timeout: .now() + grace) == .timedOut {
            self.lock.withLock { self.stopRequested = true }
            self.done.wait()
        }
        return self.lock.withLock {
            Summary(
                stderrTail: Self.tailLines(self.stderrTail),
                lines: self.lines)
        }
    }

    private func pump() {
        var open: [(fd: Int32, echoTo: Int32, isStderr: Bool)] = [
            (self.readStdout, 1, false), (self.readStderr, 2, true),
        ]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            if self.lock.withLock({ self.stopRequested }) { break }
            var polls = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&polls, nfds_t(polls.count), 100)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            var closed: [Int32] = []
            for (index, entry) in open.enumerated() where polls[index].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 {
                    closed.append(entry.fd)
                    continue
                }
                buffer.withUnsafeBytes { raw in
                    Self.writeAll(self.file, raw.baseAddress!, count)
                    switch self.echo {
                    case .none: break
                    case .direct: Self.writeAll(entry.echoTo, raw.baseAddress!, count)
                    case .handler(let handler): handler(entry.echoTo, Data(raw.prefix(count)))
                    }
                }
                let now = DispatchTime.now().uptimeNanoseconds
                self.lock.withLock {
                    self.split(buffer[..<count], from: entry.fd, stderr: entry.isStderr, at: now)
                    if entry.isStderr {
                        self.stderrTail += buffer[..<count]
                        if self.stderrTail.count > 2 * ClientOutput.tailLimit {
                            self.stderrTail.removeFirst(self.stderrTail.count - ClientOutput.tailLimit)
                        }
                    }
                }
            }
            for fd in closed {
                let now = DispatchTime.now().uptimeNanoseconds
                self.lock.withLock {
                    if let rest = self.partial.removeValue(forKey: fd), !rest.isEmpty {
                        self.keep(rest, stderr: fd == self.readStderr, at: now)
                    }
                }
                Glibc.close(fd)
                open.removeAll { $0.fd == fd }
            }
        }
        for entry in open { Glibc.close(entry.fd) }
        Glibc.close(self.file)
        self.done.signal()
    }

    /// Splits a chunk into lines (with what came before on that stream); call with the lock held.
    private func split(_ chunk: ArraySlice<UInt8>, from fd: Int32, stderr: Bool, at now: UInt64) {
        guard self.lines.count < Self.maxLines else { return }
        var pending = self.partial[fd] ?? []
        for byte in chunk {
            if byte == UInt8(ascii: "\n") {
                self.keep(pending, stderr: stderr, at: now)
                pending.removeAll(keepingCapacity: true)
            } else if pending.count < Self.maxLineLength {
                pending.append(byte)
            }
        }
        self.partial[fd] = pending
    }

    private func keep(_ bytes: [UInt8], stderr: Bool, at now: UInt64) {
        guard self.lines.count < Self.maxLines else { return }
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\r") { text.removeLast() }
        self.lines.append(Line(uptimeNanoseconds: now, stderr: stderr, text: text))
    }

    public static func writeAll(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) {
        var written = 0
        while written < count {
            let result = write(fd, pointer + written, count - written)
            if result < 0 && errno == EINTR { continue }
            if result <= 0 { return }
            written += result
        }
    }

    /// The last ``ClientOutput/tailLimit`` bytes, from a line start. `truncated`: `bytes` is
    /// itself the end of something longer (its first line may be a part).
    static func tailLines(_ bytes: [UInt8], truncated: Bool = false) -> String {
        var slice = bytes[...]
        if slice.count > ClientOutput.tailLimit || truncated {
            slice = slice.suffix(ClientOutput.tailLimit)
            if let newline = slice.firstIndex(of: UInt8(ascii: "\n")) { slice = slice[(newline + 1)...] }
        }
        return String(decoding: slice, as: UTF8.self)
    }
}
