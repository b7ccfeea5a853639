import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The user a command runs as when netcond itself runs as root (`--user NAME|UID`, packet engine).
///
/// netcond needs root for the packet engine; the command does not, and as root it could leave its
/// cgroup or change the firewall, and so slip past the link (and it would write its files as root
/// and find root's permissions, which the user's program on a real network would not). With an
/// identity the child takes the user's supplementary groups, group and user id after it has entered
/// the cgroup and its mount namespace, before anything of the command runs.
public struct ChildIdentity: Sendable, Equatable {
    public var name: String
    public var uid: uid_t
    public var gid: gid_t
    public var groups: [gid_t]
    public var home: String

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// `--user` as given: a user name or a numeric user id of this machine (its passwd entry gives the
    /// group and the home folder; its supplementary groups come with it).
    public static func resolve(_ text: String) throws(Failure) -> ChildIdentity {
        let entry: UnsafeMutablePointer<passwd>?
        if let number = UInt32(text) {
            entry = getpwuid(number)
        } else {
            entry = getpwnam(text)
        }
        guard let entry else {
            throw Failure(
                description: "--user '\(text)': no such user on this machine (allowed: a user name or a "
                    + "numeric user id from the passwd database)")
        }
        let name = String(cString: entry.pointee.pw_name)
        let uid = entry.pointee.pw_uid
        let gid = entry.pointee.pw_gid
        let home = String(cString: entry.pointee.pw_dir)
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        while getgrouplist(name, gid, &groups, &count) < 0 {
            guard count > Int32(groups.count), count < 65_536 else { break }
            groups = [gid_t](repeating: 0, count: Int(count))
        }
        groups = Array(groups.prefix(Int(max(0, min(count, Int32(groups.count))))))
        if !groups.contains(gid) { groups.insert(gid, at: 0) }
        return ChildIdentity(name: name, uid: uid, gid: gid, groups: groups, home: home)
    }

    /// Whether becoming this user needs privilege netcond does not have (it is not root, and the
    /// user is not netcond's own).
    public var needsRoot: Bool { geteuid() != 0 && self.uid != geteuid() }

    /// The command's environment as this user's: HOME, USER and LOGNAME are theirs (a root shell's
    /// HOME would be unreadable to them).
    public func environment(_ base: [String: String]) -> [String: String] {
        var environment = base
        environment["HOME"] = self.home
        environment["USER"] = self.name
        environment["LOGNAME"] = self.name
        return environment
    }

    /// The first folder on the way to `path` (`path` too) that this user cannot enter, with its mode and
    /// owner (nil: every one lets the user through, or `path` does not exist). Read from the folders'
    /// modes: owner, group (the user's groups), others.
    public func closedFolder(on path: String) -> String? {
        guard self.uid != 0, let resolved = realpath(path, nil) else { return nil }
        let full = String(cString: resolved)
        free(resolved)
        var folders = ["/"]
        var folder = ""
        for part in full.split(separator: "/") {
            folder += "/" + part
            folders.append(folder)
        }
        for folder in folders {
            var info = stat()
            guard stat(folder, &info) == 0 else { return nil }
            let search: mode_t = info.st_uid == self.uid ? 0o100 : self.groups.contains(info.st_gid) ? 0o010 : 0o001
            guard info.st_mode & search == 0 else { continue }
            let owner = getpwuid(info.st_uid).map { String(cString: $0.pointee.pw_name) } ?? String(info.st_uid)
            return "\(folder) (mode \(String(info.st_mode & 0o7777, radix: 8)), owned by \(owner))"
        }
        return nil
    }

    /// Gives the folder (or file) at `path`, new and empty, to this user: a scenario client's own
    /// folder. The reason when it could not.
    public func handOver(_ path: String) -> String? {
        guard lchown(path, self.uid, self.gid) == 0 else {
            return "cannot give \(path) to user \(self.name): \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Lets every user read the folder at `path` and the files in it (it stays netcond's): the origin's
    /// certificates, which hold nothing secret. The reason when it could not.
    public static func openForReading(_ path: String) -> String? {
        var items = [(path, mode_t(0o755))]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            items.append(((path as NSString).appendingPathComponent(name), 0o644))
        }
        for (item, mode) in items where chmod(item, mode) != 0 {
            return "cannot open \(item) for reading: \(String(cString: strerror(errno)))"
        }
        return nil
    }
}
