import CNetcondPacket
import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// Where a command under the packet engine runs, and what sends its packets to the engine.
///
/// ```
///  cgroup netcond-ID  ◀── the command and all its children (it cannot leave: that needs root)
///  nft table inet netcond, shared by every run: base chains output and input (priority -160) and
///  captive_nat (NAT, output) jump to this run's chains run_ID_*; M = 0x6e000000 | slot << 8:
///   output  socket in the cgroup ─▶ conntrack mark M; to this host: nothing more (see input)
///                                   to another host: up (clamp the SYN's MSS, mark M)
///           ICMP of a flow marked M (the kernel answering the cage's ping) ─▶ down (mark M|0x40)
///   input   socket in the cgroup ─▶ down;  other packet of a flow marked M ─▶ up
///  iptables / ip6tables mangle OUTPUT and INPUT (comment netcond-ID):
///           mark M ─▶ NFQUEUE up;  mark M|0x40 ─▶ NFQUEUE down
/// ```
/// A packet the engine accepts gets the mark's bit 0x80 ("passed") and is not queued again: a
/// packet between two processes of the cage crosses the link once. While the kernel passes the
/// packets itself (``passInKernel(_:)``, the run's marks in its set `run_ID_passing`), the link
/// chains give them 0x80 at once; with the ring (``openRing()``) also 0x01, which the cgroup's BPF
/// programs copy, and a packet to this host is then decided on output (`up_local`; else left to
/// input as above), while what has no socket of the cage (`up_in` on input, `down_out` for ICMP)
/// is copied by NFLOG.
///
/// Where a packet waits matters to the sender. A packet held on output still belongs to its
/// socket, and TCP Small Queues lets a socket have only ~2 packets below it: a link holding them
/// for its latency would throttle the sender to 2 packets per latency, which no real network does.
/// So a packet to a server on this host (loopback, the built-in origin) waits on input, after
/// loopback has released it from its socket; only packets leaving for another host wait on output
/// (see Docs/engines.md, its limits). ICMP from the kernel waits on output, before receive time stamps
/// are taken (`ping` measures with them). The conntrack mark finds packets that have no socket of
/// the cage: ICMP replies, and a server's packets on input. The MSS clamp makes TCP's packets
/// the 1,500 bytes of a real path (loopback's own MTU is 64 KB), and a sock_ops program on the
/// cgroup gives the cage's TCP sockets that path's MSS too (``givePathMSS(_:)``). The queue is xtables' NFQUEUE
/// target because nft's `queue` statement is often not built (CONFIG_NFT_QUEUE), while
/// iptables-nft works wherever nft does.
///
/// ID is the run's id: 16 random hex digits, made with the cgroup, never a process id (every run in
/// a PID namespace of its own, a container's or `unshare --pid`'s, may have the same one). The run
/// holds an exclusive flock on its cgroup's folder for its life; the mark's slot is one no live
/// run's chains set, picked under the table's lock. So ``removeStale()`` can find and remove what a
/// netcond killed by SIGKILL left, telling it by the lock nobody holds: the next packet-engine run
/// calls it first. A run that fails to start removes only what it made itself.
///
/// Why one shared table: removing a netfilter base chain makes the kernel drop every packet waiting
/// in every NFQUEUE of the machine, so a run that deleted a table of its own would take the packets
/// other runs hold. A run adds and removes only regular chains and rules, which flush nothing; the
/// last run out removes the table (then no run holds packets), under a lock so that a run starting
/// meanwhile waits.
public final class PacketCage: @unchecked Sendable {
    /// `netcond-ID`: the cgroup's name, and the comment on the run's rules.
    public let name: String
    /// The run's id (16 hex digits, the first a letter).
    public let runID: String
    public let cgroupDirectory: String
    /// This run's firewall mark: 0x6e, a slot of 16 bits no live run holds, the flag bits.
    private(set) var mark: UInt32 = 0
    static let passedBit: UInt32 = 0x80
    static let downBit: UInt32 = 0x40
    static let markMask: UInt32 = 0xffff_ffc0
    private var rules: [(tool: String, chain: String, spec: [String])] = []
    /// The cgroup's directory, held with an exclusive flock for the run's life: how any netcond, in
    /// any PID namespace, tells this run is alive (a PID another namespace cannot see is not gone).
    private var liveLock: Int32 = -1
    private var chainsAdded = false
    private var removed = false
    /// This run's chains in the shared table: `run_ID_output` and so on.
    let chainPrefix: String
    /// Why the cage's TCP sockets could not be given a 1,500-byte path's MSS (nil: they have it).
    public private(set) var pathMSSProblem: String?
    /// Why the kernel refused the ring of passed packets' copies (nil: the run has it, or needs none).
    public private(set) var ringProblem: String?

    /// The MSS a socket on a 1,500-byte path advertises (IPv4, IPv6).
    static let pathMSS: (v4: UInt16, v6: UInt16) = (1460, 1440)

    static let prefix = "netcond-"

    /// An IPv6-only run's cage (``IPv6OnlySpec``): IPv4 from its sockets is refused, and the
    /// servers' IPv4 answers to its NAT64 pool go down the link.
    public let ipv6Only: Bool
    /// 127.0.0.1's port the cage may reach whatever the link does (netcond's control API; 0: none).
    private var exemptPort: UInt16 = 0
    private var refusingIPv4 = false
    /// The BPF map the refusals are noted in (-1: none), read by ``ipv4Refusals()``.
    private var refusalMap: Int32 = -1

    /// The slot of the run's firewall mark (bits 8–23), unique among live runs.
    public var slot: UInt16 { UInt16(truncatingIfNeeded: self.mark >> 8) }

    /// The NFLOG groups (`logGroup`, `logGroup + 1`) the passing set's rules copy packets to, up
    /// to `logCopyRange` bytes (nil: the cage never passes in the kernel).
    let logGroup: UInt16?
    let logCopyRange: UInt32
    /// The nf_tables socket ``passInKernel(_:)`` changes the passing set on (-1: none).
    var nftSocket: Int32 = -1
    /// Whether the passing set holds the run's marks now.
    public internal(set) var passingInKernel = false
    /// The ring the cage's BPF programs copy the packets the kernel passes into (nil: the log
    /// groups get every copy; see ``openRing()``).
    var ring: OpaquePointer?

    /// Creates the cgroup and the rules sending its packets to queues `up` and `up + 1`; with a
    /// `logGroup` (bound on the engine's socket), also the rules that pass them in the kernel
    /// instead while ``passInKernel(_:)`` says so.
    public init(
        queue up: UInt16, logGroup: UInt16? = nil, logCopyRange: UInt32 = 128, ipv6Only: Bool = false
    ) throws(PacketEngineError) {
        self.ipv6Only = ipv6Only
        self.logGroup = logGroup
        self.logCopyRange = logCopyRange
        guard let root = Self.cgroup2Root() else {
            throw .unsupported(
                "this system has no cgroup2 hierarchy mounted (the packet engine puts the command in a cgroup of its own)"
            )
        }
        // Made and locked under the table's lock: a run cleaning up after dead ones (which holds
        // it) never sees this cgroup unlocked.
        let made = try Self.withTableLock { () throws(PacketEngineError) in try Self.makeCgroup(root: root) }
        self.runID = made.id
        self.name = Self.prefix + made.id
        self.cgroupDirectory = made.directory
        self.liveLock = made.lock
        self.chainPrefix = Self.chainPrefix(runID: made.id)
        do throws(PacketEngineError) {
            self.pathMSSProblem = Self.givePathMSS(self.cgroupDirectory)
            try self.addChains(root: root)
            if logGroup != nil {
                let fd = ncq_nft_open()
                guard fd >= 0 else { throw .system("cannot open an nf_tables netlink socket", -fd) }
                self.nftSocket = fd
            }
            let upMark = String(format: "0x%08x/0x%08x", self.mark, Self.markMask)
            let downMark = String(format: "0x%08x/0x%08x", self.mark | Self.downBit, Self.markMask)
            for tool in ["iptables", "ip6tables"] {
                for (chain, mark, queue) in [
                    ("OUTPUT", upMark, up), ("OUTPUT", downMark, up &+ 1), ("INPUT", upMark, up),
                    ("INPUT", downMark, up &+ 1),
                ] {
                    let spec = [
                        "-m", "mark", "--mark", mark, "-m", "comment", "--comment", self.name,
                        "-j", "NFQUEUE", "--queue-num", String(queue),
                    ]
                    try Self.run(tool, ["-w", "5", "-t", "mangle", "-I", chain] + spec)
                    self.rules.append((tool, chain, spec))
                }
            }
        } catch {
            self.remove()
            throw error
        }
    }

    static let table = "netcond"

    /// A new cgroup of a new run id, and its lock taken (call with the table's lock held). A name
    /// that exists is never reused: it is another run's.
    static func makeCgroup(root: String) throws(PacketEngineError) -> (id: String, directory: String, lock: Int32) {
        for _ in 0..<8 {
            let id = Self.newRunID()
            let directory = root + "/" + Self.prefix + id
            guard mkdir(directory, 0o755) == 0 else {
                if errno == EEXIST { continue }
                throw .system("cannot create the cgroup \(directory)", errno)
            }
            let lock = Self.lockLive(directory)
            guard lock >= 0 else {
                let code = errno
                rmdir(directory)  // its own, made a moment ago, empty
                throw .system("cannot lock the cgroup \(directory)", code)
            }
            return (id, directory, lock)
        }
        throw .unsupported("could not make a cgroup of a new name in \(root): 8 random run ids were all taken")
    }

    /// A new run id: 16 hex digits, 60 random bits after a random letter a–f (so that neither a
    /// tool nor an older netcond, which named runs after their process ids, takes one for a
    /// process id).
    static func newRunID() -> String {
        var generator = SystemRandomNumberGenerator()
        let letter = Array("abcdef")[Int(generator.next(upperBound: UInt64(6)))]
        let bits = String(generator.next() >> 4, radix: 16)
        return String(letter) + String(repeating: "0", count: 15 - bits.count) + bits
    }

    /// A socket on loopback believes in loopback's 64 KB MTU: it advertises an MSS of 65,483 bytes,
    /// and its receive-buffer tuning starts from ten times that, so a download's receive window
    /// grows later than on a real path (a fresh 1 MB download at 100 ms took 1.26 s where the same
    /// kernel on a 1,500-byte path takes 1.19 s). The MSS clamp fixes the packets, not the socket:
    /// a sock_ops program on the cgroup gives each TCP socket of the cage the MSS of a 1,500-byte
    /// path as it connects or listens (TCP_MAXSEG), as its route would on a real network. Returns
    /// why it could not (no BPF in this kernel, or no CAP_BPF), or nil.
    static func givePathMSS(_ cgroup: String) -> String? {
        var log = [CChar](repeating: 0, count: 4096)
        let result = ncq_cage_path_mss(cgroup, Self.pathMSS.v4, Self.pathMSS.v6, &log, log.count)
        guard result != 0 else { return nil }
        let text = String(decoding: log.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let verifier = text.split(separator: "\n").last.map { ": \($0)" } ?? ""
        return
            "cannot attach a BPF program to the cgroup: \(PacketEngineError.system("bpf", -result).description)\(verifier)"
    }

    static func chainPrefix(runID: String) -> String { "run_" + runID }

    /// The shared table and its base chains (idempotent: `add` leaves what exists).
    static let baseChains = """
        add table inet \(table)
        add chain inet \(table) output { type filter hook output priority -160; policy accept; }
        add chain inet \(table) input { type filter hook input priority -160; policy accept; }
        add chain inet \(table) captive_nat { type nat hook output priority -100; policy accept; }

        """

    /// This run's chains, and the rules in the base chains that lead to them. The cgroup's nft path
    /// is relative to /sys/fs/cgroup, as nft resolves it.
    /// The mark is chosen under the table lock among the slots no live run's chains set. Also notes,
    /// in the shared table, the `ip mangle` and `ip6 mangle` tables that are not there yet: the
    /// run's iptables rules make them, and the last run out removes them when they are left empty
    /// (``removeMangleTables(markedIn:)``).
    private func addChains(root: String) throws(PacketEngineError) {
        try Self.withTableLock { () throws(PacketEngineError) in
            let listing = (try? Self.run("nft", ["list", "table", "inet", Self.table])) ?? ""
            guard let slot = Self.markSlot(taken: Self.markSlots(in: listing)) else {
                throw PacketEngineError.unsupported(
                    "every one of the 65,536 firewall marks netcond uses is held by a live run")
            }
            self.mark = 0x6e00_0000 | (UInt32(slot) << 8)
            if self.logGroup != nil {
                switch self.openRing() {
                case .success(let ring): self.ring = ring
                case .failure(let refusal): self.ringProblem = refusal.description
                }
            }
            let tables = (try? Self.run("nft", ["list", "tables"]))?.split(separator: "\n").map(String.init) ?? []
            var script = self.ruleset(root: root)
            for family in ["ip", "ip6"] where !tables.contains("table \(family) mangle") {
                script += "add chain inet \(Self.table) \(Self.madeMangleMarker(family))\n"
            }
            try Self.run("nft", ["-f", "-"], input: script)
            self.chainsAdded = true
        }
    }

    /// The slots (bits 8–23 of the mark) the runs in a listing of the shared table set.
    static func markSlots(in listing: String) -> Set<UInt16> {
        var slots = Set<UInt16>()
        for word in listing.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" })
        where word.hasPrefix("0x6e") {
            guard let value = UInt32(word.dropFirst(2), radix: 16), value >> 24 == 0x6e else { continue }
            slots.insert(UInt16(truncatingIfNeeded: value >> 8))
        }
        return slots
    }

    /// A free slot: `first` (a random one) when it is free, else the next free one (nil: none is).
    static func markSlot(taken: Set<UInt16>, first: UInt16 = .random(in: .min ... .max)) -> UInt16? {
        for step in 0...Int(UInt16.max) {
            let slot = first &+ UInt16(truncatingIfNeeded: step)
            if !taken.contains(slot) { return slot }
        }
        return nil
    }

    /// Lets TCP to and from `127.0.0.1:port` bypass the link: netcond's own control API, which a
    /// command must reach to end the very outage it started.
    public func exempt(loopbackPort port: Int) throws(PacketEngineError) {
        self.exemptPort = UInt16(clamping: port)
        for chain in ["output", "input"] {
            for side in ["dport", "sport"] {
                try Self.run(
                    "nft",
                    [
                        "insert", "rule", "inet", Self.table, self.chainPrefix + "_" + chain, "ip", "saddr",
                        "127.0.0.1",
                        "ip", "daddr", "127.0.0.1",
                        "tcp", side, String(port), "return",
                    ])
            }
        }
    }

    /// Where a closed captive portal sends the cage's new TCP connections: plain HTTP (port 80) to
    /// the portal's page, and with `tls` every other port but DNS's to its TLS server (the portal's
    /// own certificate). IPv4 goes to the portal's address; IPv6 to `::1` ports (nil: IPv6 is left
    /// alone, on a machine without `::1`).
    public struct CaptiveRedirect: Sendable, Equatable {
        public var address: String
        public var http: Int
        public var http6: Int?
        public var tls: (port: Int, port6: Int?)?

        public init(address: String, http: Int, http6: Int?, tls: (port: Int, port6: Int?)?) {
            self.address = address
            self.http = http
            self.http6 = http6
            self.tls = tls
        }

        public static func == (a: Self, b: Self) -> Bool {
            a.address == b.address && a.http == b.http && a.http6 == b.http6 && a.tls?.port == b.tls?.port
                && a.tls?.port6 == b.tls?.port6
        }
    }

    /// Points the cage's new TCP connections at a closed portal (`redirect`), or lets them go to
    /// their targets again (nil). A NAT chain on output, for connections of the cage only (its
    /// conntrack mark); connections already made keep their way.
    public func setCaptive(_ redirect: CaptiveRedirect?) throws(PacketEngineError) {
        let chain = self.chainPrefix + "_captive"
        var script = "flush chain inet \(Self.table) \(chain)\n"
        if let redirect {
            let rule = "add rule inet \(Self.table) \(chain)"
            script +=
                "\(rule) meta nfproto ipv4 ip daddr != \(redirect.address) tcp dport 80 dnat ip to \(redirect.address):\(redirect.http)\n"
            if let http6 = redirect.http6 {
                script += "\(rule) meta nfproto ipv6 tcp dport 80 dnat ip6 to [::1]:\(http6)\n"
            }
            if let tls = redirect.tls {
                script +=
                    "\(rule) meta nfproto ipv4 ip daddr != \(redirect.address) tcp dport != { 53, 80 } dnat ip to \(redirect.address):\(tls.port)\n"
                if let port6 = tls.port6 {
                    script += "\(rule) meta nfproto ipv6 tcp dport != { 53, 80 } dnat ip6 to [::1]:\(port6)\n"
                }
            }
        }
        try Self.run("nft", ["-f", "-"], input: script)
    }

    /// An IPv6-only cage's sockets get ENETUNREACH for any IPv4 destination (and an IPv4-mapped
    /// IPv6 one), as on a device with no IPv4 route: a BPF program on the cgroup, at connect and
    /// at a UDP send. 127.0.0.1 at the exempt port (the control API) stays reachable. Once, before
    /// the first command runs; nothing for a cage that is not IPv6-only.
    public func refuseIPv4() throws(PacketEngineError) {
        guard self.ipv6Only, !self.refusingIPv4 else { return }
        var log = [CChar](repeating: 0, count: 4096)
        var map: Int32 = -1
        let result = ncq_cage_refuse_ipv4(self.cgroupDirectory, self.exemptPort, &map, &log, log.count)
        guard result == 0 else {
            let text = String(decoding: log.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let verifier = text.split(separator: "\n").last.map { ": \($0)" } ?? ""
            throw .unsupported(
                "ipv6_only needs a BPF program on the command's cgroup that refuses IPv4, and the kernel refused it: \(PacketEngineError.system("bpf", -result).description)\(verifier)"
            )
        }
        self.refusingIPv4 = true
        self.refusalMap = map
    }

    /// An IPv4 destination an IPv6-only cage's socket was refused: when (CLOCK_MONOTONIC
    /// nanoseconds), which address and port.
    public struct IPv4Refusal: Sendable, Equatable {
        public var at: Int64
        public var address: String
        public var port: Int
    }

    /// The IPv4 destinations refused so far: how many in all, and the last 32 of them in time
    /// order (empty for a cage that refuses none).
    public func ipv4Refusals() -> (count: Int, recent: [IPv4Refusal]) {
        guard self.refusalMap >= 0 else { return (0, []) }
        var slots = [ncq_refusal](repeating: ncq_refusal(), count: 32)
        let count = ncq_cage_refusals(self.refusalMap, &slots, 32)
        guard count > 0 else { return (0, []) }
        let recent = slots.prefix(min(Int(count), 32)).map { slot in
            let address = withUnsafeBytes(of: slot.address) { Array($0) }
            return IPv4Refusal(at: slot.at, address: AddressBlock.format(address), port: Int(slot.port))
        }
        return (Int(count), recent.sorted { $0.at < $1.at })
    }

    /// Opens the cgroup's `cgroup.procs` for a child to write itself into before it executes.
    public func openProcsFile() throws(PacketEngineError) -> Int32 {
        let fd = open(self.cgroupDirectory + "/cgroup.procs", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .system("cannot open \(self.cgroupDirectory)/cgroup.procs", errno) }
        return fd
    }

    /// Kills whatever still runs in the cgroup (a daemon the command left) and removes the rules,
    /// the table and the cgroup. Safe to call twice.
    public func remove() {
        guard !self.removed else { return }
        self.removed = true
        for rule in self.rules.reversed() {
            _ = try? Self.run(rule.tool, ["-w", "5", "-t", "mangle", "-D", rule.chain] + rule.spec)
        }
        self.rules = []
        if self.nftSocket >= 0 {
            close(self.nftSocket)
            self.nftSocket = -1
        }
        if self.refusalMap >= 0 {
            close(self.refusalMap)
            self.refusalMap = -1
        }
        if let ring = self.ring {
            ncq_ring_close(ring)
            self.ring = nil
        }
        if self.chainsAdded {
            let runID = self.runID
            _ = try? Self.withTableLock { () throws(PacketEngineError) in Self.removeRuns { $0 == runID } }
        }
        // The cgroup is this run's only while it holds its lock (made under it): never another's.
        if self.liveLock >= 0 {
            Self.removeCgroup(self.cgroupDirectory)
            close(self.liveLock)
            self.liveLock = -1
        }
    }

    deinit { self.remove() }

    /// The process ids still in the cgroup.
    public var processes: [pid_t] {
        guard let text = try? String(contentsOfFile: self.cgroupDirectory + "/cgroup.procs", encoding: .utf8) else {
            return []
        }
        return text.split(separator: "\n").compactMap { pid_t($0) }
    }

    /// Kills what still runs in the cage (a process the command left behind, `setsid` or not) and
    /// waits up to 2 s for it to go; the cage stays. The checks read the client's files only after
    /// this: nothing of the client can change them meanwhile.
    public func killProcesses() {
        Self.killAll(self.cgroupDirectory)
    }

}
