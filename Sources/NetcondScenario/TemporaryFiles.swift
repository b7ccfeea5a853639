import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// netcond's temporary folders and files under `$TMPDIR` (or /tmp), named
/// `netcond-PID-KIND-XXXXXX`: private to this user, removed by whoever made them on every exit
/// path netcond sees. A netcond killed by SIGKILL cannot; the next netcond that starts removes
/// what a dead one left (``removeStale()``), telling them by the process id in the name.
///
/// A process id is no proof across PID namespaces: a netcond in a container, or under `unshare
/// --pid`, sees no process of that number for a run outside, which is alive. So every netcond that
/// makes temporary files holds, for its whole life, an exclusive flock on a file of its own,
/// `.netcond-live-PID-XXXXXX` (made under another name, locked, then renamed: never seen unlocked);
/// files of a process id whose lock is held anywhere are left alone.
public enum TemporaryFiles {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public static var base: String {
        ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    }

    /// `netcond-PID-KIND`: the part before the random suffix.
    static func prefix(_ kind: String) -> String {
        let safe = String(kind.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "-" }.prefix(40))
        return "netcond-\(getpid())-\(safe)"
    }

    /// This process's live lock, taken once (the path, nil when it could not be made: then this
    /// process's files are told apart by its process id alone, as before).
    static let liveLock: String? = {
        let base = TemporaryFiles.base
        // A fresh name, made exclusively, close-on-exec from the start (no child inherits the lock).
        var made = ""
        var descriptor: Int32 = -1
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        for _ in 0..<100 where descriptor < 0 {
            let suffix = String((0..<10).map { _ in letters[Int.random(in: 0..<letters.count)] })
            made = "\(base)/.netcond-init-\(getpid())-\(suffix)"
            descriptor = open(made, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor < 0 && errno != EEXIST { return nil }
        }
        guard descriptor >= 0 else { return nil }
        // Held until the process ends (the descriptor is never closed); then renamed into view.
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            unlink(made)
            return nil
        }
        let live = made.replacingOccurrences(of: "/.netcond-init-", with: "/.netcond-live-")
        guard rename(made, live) == 0 else {
            close(descriptor)
            unlink(made)
            return nil
        }
        atexit(removeLiveLock)
        return live
    }()

    /// Takes this process's live lock, if not yet taken.
    static func holdLiveLock() {
        _ = self.liveLock
    }

    /// The process ids whose live lock some process holds (whatever its PID namespace).
    static func liveProcesses(among names: [String], in base: String) -> Set<pid_t> {
        var live = Set<pid_t>()
        for name in names where name.hasPrefix(".netcond-live-") {
            let rest = name.dropFirst(".netcond-live-".count)
            guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]) else { continue }
            let path = base + "/" + name
            if path == self.liveLock || self.isLocked(path) {
                live.insert(pid)
            } else if kill(pid, 0) != 0 && errno == ESRCH {
                // Its process is gone (a SIGKILL left it): removed, when it is this user's.
                var info = stat()
                if lstat(path, &info) == 0, info.st_uid == getuid() { unlink(path) }
            }
        }
        return live
    }

    /// Whether a process holds the lock of `path`: only a regular file of this user's counts (a
    /// pipe or a link another user left there would block or mislead the check; never followed).
    static func isLocked(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else { return false }
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return flock(descriptor, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }

    /// A new folder only this user can enter.
    public static func makeDirectory(kind: String) throws(Failure) -> String {
        self.holdLiveLock()
        var template = Array("\(self.base)/\(self.prefix(kind))-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "cannot create a folder in \(self.base): \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    /// A new empty file; `suffix` (e.g. `.log`) follows the random part.
    public static func makeFile(kind: String, suffix: String = "") throws(Failure) -> String {
        self.holdLiveLock()
        var template = Array("\(self.base)/\(self.prefix(kind))-XXXXXX\(suffix)".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, Int32(suffix.utf8.count)) }
        guard descriptor >= 0 else {
            throw Failure(description: "cannot create a file in \(self.base): \(String(cString: strerror(errno)))")
        }
        close(descriptor)
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Removes the folders and files of netcond processes that no longer exist (killed by
    /// SIGKILL, or a crash), owned by this user. Returns how many it removed.
    @discardableResult
    public static func removeStale() -> Int {
        self.holdLiveLock()
        return self.removeStale(in: self.base)
    }

    /// ``removeStale()`` in the folder `base`.
    static func removeStale(in base: String) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: base) else { return 0 }
        let live = self.liveProcesses(among: names, in: base)
        var removed = 0
        for name in names where name.hasPrefix("netcond-") {
            let rest = name.dropFirst("netcond-".count)
            guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]), pid > 0, pid != getpid() else {
                continue
            }
            // A live lock of that process id, in any PID namespace: alive.
            if live.contains(pid) { continue }
            // Alive (or not ours to signal): leave it. Only "no such process" means dead.
            if kill(pid, 0) == 0 || errno != ESRCH { continue }
            let path = base + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, info.st_uid == getuid() else { continue }
            if (try? FileManager.default.removeItem(atPath: path)) != nil { removed += 1 }
        }
        return removed
    }
}

/// Removes this process's live lock as it exits (atexit: a C function, no context).
private func removeLiveLock() {
    if let path = TemporaryFiles.liveLock { unlink(path) }
}
