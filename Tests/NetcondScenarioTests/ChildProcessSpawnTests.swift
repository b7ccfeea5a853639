import Foundation
import Testing

@testable import NetcondScenario

/// A command that cannot start says which step of its start failed, not only the errno.
@Suite struct ChildProcessSpawnTests {
    static func failure(_ start: () throws(ChildProcessError) -> ChildProcess) -> String? {
        do {
            let child = try start()
            _ = child.signal(SIGKILL)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func aCgroupThatCannotBeJoinedIsNamed() throws {
        // cgroup.procs opened read-only: the child's write into it fails.
        let procs = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(procs) }
        let message = Self.failure { () throws(ChildProcessError) in
            try ChildProcess.spawn(["/bin/true"], environment: [:], cgroup: procs)
        }
        let said = try #require(message)
        #expect(said.contains("cannot start /bin/true: cannot move it into the link's cgroup: Bad file descriptor"))
    }

    @Test func aMissingFolderIsNamed() throws {
        let folder = "/nonexistent-netcond-\(getpid())"
        let message = Self.failure { () throws(ChildProcessError) in
            try ChildProcess.spawn(["/bin/true"], environment: [:], workingDirectory: folder)
        }
        let said = try #require(message)
        #expect(said.contains("cannot enter \(folder): No such file or directory"))
    }
}
