import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// netcond's temporary folders and files under `$TMPDIR` (or /tmp), named
/// `netcond-PID-KIND-XXXXXX`: private to this user, removed by whoever made them on every exit
/// path netcond sees. A netcond killed by SIGKILL cannot; the next netcond that starts removes
/// what a dead one left (``removeStale()``), telling them by the process id in the name.
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

    /// A new folder only this user can enter.
    public static func makeDirectory(kind: String) throws(Failure) -> String {
        var template = Array("\(self.base)/\(self.prefix(kind))-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "cannot create a folder in \(self.base): \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    /// A new empty file; `suffix` (e.g. `.log`) follows the random part.
    public static func makeFile(kind: String, suffix: String = "") throws(Failure) -> String {
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
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: self.base) else { return 0 }
        var removed = 0
        for name in names where name.hasPrefix("netcond-") {
            let rest = name.dropFirst("netcond-".count)
            guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]), pid > 0, pid != getpid() else { continue }
            // Alive (or not ours to signal): leave it. Only "no such process" means dead.
            if kill(pid, 0) == 0 || errno != ESRCH { continue }
            let path = self.base + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, info.st_uid == getuid() else { continue }
            if (try? FileManager.default.removeItem(atPath: path)) != nil { removed += 1 }
        }
        return removed
    }
}
