import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Why the packet engine cannot run. Each says what is missing and what to do instead.
public enum PacketEngineError: Error, Equatable, CustomStringConvertible {
    /// Neither root nor CAP_NET_ADMIN.
    case notPrivileged
    /// A system tool the engine drives is not installed.
    case missingTool(String)
    /// The kernel or system lacks something the engine needs.
    case unsupported(String)
    /// A system call failed: what was being done, and errno.
    case system(String, Int32)
    /// nft or iptables refused: the command, and what it said.
    case toolFailed(String, String)
    /// A capture file could not be opened: its path, and why.
    case capture(String, String)

    public var description: String {
        switch self {
        case .notPrivileged:
            return "the packet engine needs root or CAP_NET_ADMIN (it puts the command in a cgroup of its own and "
                + "adds netfilter rules that send its packets through netcond); this process has neither. "
                + "Run it as root (sudo), or use --engine proxy, which needs no privilege"
        case .missingTool(let tool):
            let package = tool == "nft" ? "nftables" : "iptables"
            return "the packet engine needs \(tool), which is not installed (apt-get install \(package)); "
                + "--engine proxy needs neither"
        case .unsupported(let what):
            return "the packet engine cannot run here: \(what); --engine proxy works without it"
        case .system(let what, let code):
            return "\(what): \(String(cString: strerror(code)))"
        case .capture(let path, let why):
            return "cannot write the capture \(path): \(why)"
        case .toolFailed(let command, let message):
            return "`\(command)` failed: \(message.isEmpty ? "no message" : message)"
        }
    }

    /// netcond's exit code: 3, netcond could not run.
    public var exitCode: Int32 { 3 }
}

/// Whether this process may run the packet engine: root, or CAP_NET_ADMIN in its effective set.
public enum PacketPrivilege {
    public static func check() throws(PacketEngineError) {
        if geteuid() == 0 { return }
        guard Self.hasNetAdmin() else { throw .notPrivileged }
    }

    static func hasNetAdmin() -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return false }
        for line in status.split(separator: "\n") where line.hasPrefix("CapEff:") {
            let hex = line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces)
            guard let mask = UInt64(hex, radix: 16) else { return false }
            return mask & (1 << 12) != 0
        }
        return false
    }
}
