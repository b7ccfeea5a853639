import Foundation
import Testing

@testable import NetcondScenario

#if canImport(Glibc)
import Glibc
#endif

/// What a netcond killed by SIGKILL left is removed by the next; what a live run holds is not,
/// even when its process id means nothing here (another PID namespace): its live lock says so.
@Suite struct TemporaryFilesTests {
    /// A process id no process has here (past the kernel's pid_max).
    let absent: pid_t = 4_194_304 + 77

    @Test func aLiveLockKeepsARunsFilesThatAProcessIDCannot() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-tests-\(getpid())-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        #expect(kill(self.absent, 0) != 0 && errno == ESRCH)
        let hosts = base + "/netcond-\(self.absent)-hosts-abc123"
        #expect(FileManager.default.createFile(atPath: hosts, contents: Data("127.0.0.1 x\n".utf8)))
        // The run in another namespace holds its live lock.
        let lock = base + "/.netcond-live-\(self.absent)-xyz789"
        #expect(FileManager.default.createFile(atPath: lock, contents: nil))
        let held = open(lock, O_RDONLY)
        #expect(held >= 0 && flock(held, LOCK_EX) == 0)
        #expect(TemporaryFiles.removeStale(in: base) == 0)
        #expect(FileManager.default.fileExists(atPath: hosts), "a live run's file is kept")
        #expect(FileManager.default.fileExists(atPath: lock))
        // It ends without removing its files (SIGKILL): the lock is free, and both go.
        close(held)
        #expect(TemporaryFiles.removeStale(in: base) == 1)
        #expect(!FileManager.default.fileExists(atPath: hosts) && !FileManager.default.fileExists(atPath: lock))
    }

    /// What another user leaves in the shared folder under a live lock's name counts for nothing,
    /// and a pipe there is never opened (opening one for reading would wait for a writer for ever).
    @Test func onlyThisUsersRegularFilesAreLiveLocks() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-tests-\(getpid())-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let pipe = base + "/.netcond-live-\(self.absent)-pipe"
        #expect(mkfifo(pipe, 0o666) == 0)
        #expect(!TemporaryFiles.isLocked(pipe))
        let link = base + "/.netcond-live-\(self.absent)-link"
        #expect(symlink("/dev/zero", link) == 0)
        #expect(!TemporaryFiles.isLocked(link))
        let hosts = base + "/netcond-\(self.absent)-hosts-abc123"
        #expect(FileManager.default.createFile(atPath: hosts, contents: nil))
        #expect(
            TemporaryFiles.removeStale(in: base) == 1,
            "the dead run's file goes; the pipe and the link keep nothing alive")
        if geteuid() == 0 {
            // Another user's file, locked by them: not this user's lock.
            let fake = base + "/.netcond-live-\(self.absent)-fake"
            #expect(FileManager.default.createFile(atPath: fake, contents: nil))
            #expect(chown(fake, 65_534, 65_534) == 0)
            let held = open(fake, O_RDONLY)
            #expect(held >= 0 && flock(held, LOCK_EX) == 0)
            defer { close(held) }
            #expect(!TemporaryFiles.isLocked(fake))
        }
    }

    @Test func thisProcessHoldsItsOwnLiveLock() throws {
        let path = try #require(TemporaryFiles.liveLock)
        #expect(path.contains("/.netcond-live-\(getpid())-"))
        #expect(TemporaryFiles.isLocked(path), "held: another open of the file cannot take it")
        #expect(FileManager.default.fileExists(atPath: path))
    }
}
