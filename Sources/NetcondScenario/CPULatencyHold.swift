#if canImport(Glibc)
import Glibc
#endif

/// Keeps every CPU out of deep idle states while it lives, through the kernel's PM QoS interface
/// (`/dev/cpu_dma_latency`, as `cyclictest` does).
///
/// On a virtual machine or a laptop an idle CPU takes 0.1–0.5 ms to wake up. Each emulated round
/// trip wakes netcond, the program under test and its server several times, so those exits add
/// up to about half a millisecond per round trip that no timer in netcond can remove. With the hold,
/// idle CPUs poll instead (more power, no exit latency). The request ends when the descriptor
/// closes, which the kernel does on any exit of the process, signals and crashes included.
public final class CPULatencyHold: @unchecked Sendable {
    private var descriptor: Int32

    /// The device the request is written to.
    public static let devicePath = "/dev/cpu_dma_latency"

    /// Asks for a wake-up latency of `microseconds` (0: never leave the polling state).
    /// Throws a one-line, user-facing reason when the device is missing or not writable.
    public init(microseconds: Int32 = 0) throws(CPULatencyHoldError) {
        let fd = open(Self.devicePath, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw CPULatencyHoldError(
                reason: "cannot open \(Self.devicePath): \(String(cString: strerror(errno)))"
                    + (errno == EACCES || errno == EPERM ? " (it needs root)" : ""))
        }
        var value = microseconds
        let written = withUnsafeBytes(of: &value) { write(fd, $0.baseAddress, $0.count) }
        guard written == MemoryLayout<Int32>.size else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw CPULatencyHoldError(reason: "cannot write to \(Self.devicePath): \(reason)")
        }
        self.descriptor = fd
    }

    /// Ends the request now (otherwise it ends with the process).
    public func release() {
        if self.descriptor >= 0 {
            close(self.descriptor)
            self.descriptor = -1
        }
    }

    deinit { self.release() }
}

public struct CPULatencyHoldError: Error, CustomStringConvertible {
    public let reason: String
    public var description: String { self.reason }
}
