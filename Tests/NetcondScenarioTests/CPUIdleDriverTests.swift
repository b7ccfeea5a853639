import Foundation
import Testing

@testable import NetcondScenario

/// `--low-latency` steers the cpuidle driver through `/dev/cpu_dma_latency`; on a machine without
/// one it changes nothing, and netcond says so rather than promise polling CPUs.
@Suite struct CPUIdleDriverTests {
    /// A `/sys` of the test's own with `current_driver` holding `content` (nil: no such file).
    private func withSysfs<T>(_ content: String?, _ body: (String) -> T) throws -> T {
        let root = NSTemporaryDirectory() + "netcond-sysfs-\(UUID().uuidString)"
        let folder = root + "/devices/system/cpu/cpuidle"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        if let content {
            try content.write(toFile: folder + "/current_driver", atomically: true, encoding: .utf8)
        }
        return body(root)
    }

    @Test func theDriverIsReadFromSysfs() throws {
        #expect(try self.withSysfs("haltpoll\n") { CPUIdleDriver.current(sysfs: $0) } == .present("haltpoll"))
        #expect(try self.withSysfs("intel_idle") { CPUIdleDriver.current(sysfs: $0) } == .present("intel_idle"))
        #expect(try self.withSysfs("none\n") { CPUIdleDriver.current(sysfs: $0) } == CPUIdleDriver.none)
        #expect(try self.withSysfs("\n") { CPUIdleDriver.current(sysfs: $0) } == .unknown)
        #expect(try self.withSysfs(nil) { CPUIdleDriver.current(sysfs: $0) } == .unknown)
    }

    @Test func onlyAMissingDriverIsSaidToTakeTheHoldsEffect() throws {
        let reason = try #require(CPUIdleDriver.none.withoutEffect)
        #expect(reason.contains("no cpuidle driver") && reason.contains("cpuidle_haltpoll.force=1"), "\(reason)")
        #expect(CPUIdleDriver.present("haltpoll").withoutEffect == nil)
        #expect(CPUIdleDriver.unknown.withoutEffect == nil)
    }
}
