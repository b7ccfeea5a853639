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

/// The kernel's cpuidle driver, which `/dev/cpu_dma_latency` steers. Without one (a virtual
/// machine booted without `cpuidle_haltpoll`, say) an idle CPU halts whatever the hold asks, and each
/// wake-up still costs what it costs: `--low-latency` then says so instead of promising polling.
public enum CPUIdleDriver: Sendable, Equatable {
    /// The driver's name (`haltpoll`, `intel_idle`, `acpi_idle` …): the hold works.
    case present(String)
    /// The kernel has cpuidle but no driver (`current_driver` reads `none`): the hold changes nothing.
    case none
    /// Unreadable (no sysfs, or a kernel without cpuidle): nothing is said.
    case unknown

    /// Read from `sysfs` (default `/sys`): `devices/system/cpu/cpuidle/current_driver`.
    public static func current(sysfs: String = "/sys") -> CPUIdleDriver {
        guard let file = fopen(sysfs + "/devices/system/cpu/cpuidle/current_driver", "r") else { return .unknown }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 64)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return .unknown }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        guard let name = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isWhitespace).first else {
            return .unknown
        }
        return name == "none" ? .none : .present(String(name))
    }

    /// Why a hold changes nothing here (nil when it works or nothing is known), for a one-line notice.
    public var withoutEffect: String? {
        guard self == .none else { return nil }
        return "this machine has no cpuidle driver (/sys/devices/system/cpu/cpuidle/current_driver reads none), "
            + "so an idle CPU halts whatever /dev/cpu_dma_latency asks and each wake-up from idle still costs "
            + "0.1-0.5 ms; a KVM guest gets a driver that polls with the kernel option cpuidle_haltpoll.force=1"
    }
}

public struct CPULatencyHoldError: Error, CustomStringConvertible {
    public let reason: String
    public var description: String { self.reason }
}
