import Foundation
import Testing

@testable import NetcondPacket

/// A run is known by a random run id and its locked cgroup, never by a process id: runs in PID
/// namespaces of their own all have the same small PID, and once took one another for the same
/// run. Its firewall mark is unique among the live runs: two runs whose PIDs shared their low 16
/// bits once shared a mark, and one measured the other's link.
@Suite struct PacketCageMarkTests {
    /// What `nft list table inet netcond` shows of a run whose slot is `slot`.
    func listing(slots: [UInt16]) -> String {
        slots.map { slot in
            let mark = String(format: "0x%08x", 0x6e00_0000 | (UInt32(slot) << 8))
            let down = String(format: "0x%08x", 0x6e00_0000 | (UInt32(slot) << 8) | 0x40)
            return """
                \tchain run_\(slot)_up {
                \t\tmeta mark & 0x00000080 == 0x00000080 return
                \t\tmeta mark set \(mark)
                \t}
                \tchain run_\(slot)_down {
                \t\tmeta mark set \(down)
                \t}
                \tchain run_\(slot)_output {
                \t\tsocket cgroupv2 level 1 "netcond-\(slot)" ct mark set \(mark)
                \t\tct mark \(mark) meta l4proto { icmp, ipv6-icmp } goto run_\(slot)_down
                \t}

                """
        }.joined()
    }

    @Test func theSlotsOfTheLiveRunsAreReadFromTheTable() {
        #expect(PacketCage.markSlots(in: self.listing(slots: [0x1234, 0x00ff])) == [0x1234, 0x00ff])
        #expect(PacketCage.markSlots(in: "").isEmpty)
        // Other hexadecimal numbers in the listing (the passed bit, a handle) are not marks.
        #expect(PacketCage.markSlots(in: "meta mark & 0x00000080 == 0x00000080 return # handle 0x6e").isEmpty)
    }

    /// A run's own rules in the shared table: its chains' rules and the jumps to them, never those of
    /// a run whose number starts with its own (run_12 beside run_123), nor its captive chain's
    /// (netcond changes those itself).
    @Test func aRunsOwnRulesAreReadFromTheSharedTable() {
        let listing = """
            table inet netcond {
            	chain output {
            		type filter hook output priority -160; policy accept;
            		jump run_12_output comment "netcond-12"
            		jump run_123_output comment "netcond-123"
            	}
            	chain run_12_output {
            		socket cgroupv2 level 1 "unified/netcond-12" goto run_12_up
            	}
            	chain run_123_output {
            		socket cgroupv2 level 1 "unified/netcond-123" goto run_123_up
            	}
            	chain run_12_captive {
            		meta nfproto ipv4 tcp dport 80 dnat ip to 127.110.0.1:8080
            	}
            }
            """
        #expect(
            PacketCage.ownLines(in: listing, chainPrefix: "run_12") == [
                "nft output: jump run_12_output comment \"netcond-12\"",
                "nft run_12_output: socket cgroupv2 level 1 \"unified/netcond-12\" goto run_12_up",
            ])
        #expect(PacketCage.ownLines(in: "", chainPrefix: "run_12").isEmpty)
    }

    /// A process's start time and cgroup, as the cage watch reads them.
    @Test func theWatchReadsAProcesssStartTimeAndCgroup() {
        #expect(CageWatch.startTime(getpid()) != nil)
        #expect(CageWatch.startTime(getpid()) == CageWatch.startTime(getpid()))
        #expect(CageWatch.startTime(-1) == nil)
        // Where this kernel has a cgroup2 line for the process, it is read from there.
        let own = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8))?.split(separator: "\n")
            .first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
        #expect(CageWatch.cgroup(of: getpid()) == own)
    }

    @Test func aRunGetsAFreeSlotNeverOneALiveRunHolds() {
        let taken = PacketCage.markSlots(in: self.listing(slots: [4_464]))
        #expect(PacketCage.markSlot(taken: [], first: 4_464) == 4_464)
        #expect(PacketCage.markSlot(taken: taken, first: 4_464) == 4_465)
        #expect(PacketCage.markSlot(taken: [65_535], first: 65_535) == 0, "it wraps")
        #expect(PacketCage.markSlot(taken: Set(0...UInt16.max)) == nil)
        let almostFull = Set(0...UInt16.max).subtracting([777])
        #expect(PacketCage.markSlot(taken: almostFull) == 777, "from a random slot on, the one free slot")
    }

    /// 16 hex digits, the first a letter (so no tool takes it for a process id), new every time.
    @Test func aRunIDIsRandomAndNeverLooksLikeAProcessID() {
        let ids = (0..<200).map { _ in PacketCage.newRunID() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.count == 16 && id.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(id)")
            #expect(id.first.map { "abcdef".contains($0) } == true, "\(id)")
            #expect(PacketCage.chainPrefix(runID: id) == "run_" + id)
        }
    }

    /// A run is gone when nobody holds its cgroup's lock, whatever its id says; what is not a run's
    /// name is never taken for a gone run.
    @Test func aRunIsGoneWhenNobodyHoldsItsCgroupsLock() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-cage-test-\(UUID().uuidString)"
        ).path
        #expect(mkdir(root, 0o755) == 0)
        defer { rmdir(root) }
        let id = PacketCage.newRunID()
        let directory = root + "/netcond-" + id
        #expect(mkdir(directory, 0o755) == 0)
        defer { rmdir(directory) }
        let held = PacketCage.lockLive(directory)
        #expect(held >= 0)
        #expect(!PacketCage.isGone(runID: Substring(id), root: root), "a live run, in whatever PID namespace")
        close(held)
        #expect(PacketCage.isGone(runID: Substring(id), root: root), "its run was killed")
        #expect(PacketCage.isGone(runID: "b0000000000000ff", root: root), "no cgroup at all: its rules are left over")
        #expect(!PacketCage.isGone(runID: "", root: root))
        #expect(!PacketCage.isGone(runID: "not-a-run", root: root))
    }

    /// The mangle tables iptables-nft made are removed only when nothing but its empty built-in
    /// chains is left in them.
    @Test func onlyAnEmptyBuiltInMangleTableIsTakenForEmpty() {
        let empty = """
            # Warning: table ip mangle is managed by iptables-nft, do not touch!
            table ip mangle {
            	chain OUTPUT {
            		type route hook output priority mangle; policy accept;
            	}
            	chain INPUT {
            		type filter hook input priority mangle; policy accept;
            	}
            }
            """
        #expect(PacketCage.isEmptyBuiltinTable(empty))
        #expect(PacketCage.isEmptyBuiltinTable("table ip6 mangle {\n}\n"))
        let rule = empty.replacingOccurrences(
            of: "policy accept;\n\t}\n\tchain INPUT",
            with: "policy accept;\n\t\tip saddr 192.0.2.1 counter accept\n\t}\n\tchain INPUT")
        #expect(rule != empty && !PacketCage.isEmptyBuiltinTable(rule), "another program's rule")
        #expect(
            !PacketCage.isEmptyBuiltinTable(empty.replacingOccurrences(of: "chain INPUT", with: "chain MINE")),
            "a chain of its own")
        #expect(
            !PacketCage.isEmptyBuiltinTable(
                empty.replacingOccurrences(of: "policy accept;\n\t}\n}", with: "policy drop;\n\t}\n}")))
        #expect(
            !PacketCage.isEmptyBuiltinTable(
                empty.replacingOccurrences(
                    of: "\tchain INPUT {", with: "\tset blocked {\n\t\ttype ipv4_addr\n\t}\n\tchain INPUT {")))
        #expect(!PacketCage.isEmptyBuiltinTable(""), "no listing: nothing known")
    }

    /// A run is told alive by the lock it holds on its cgroup's directory, which every PID namespace
    /// sees; a process id from another namespace is no proof that it is gone.
    @Test func aLiveRunIsToldByItsLockNotByItsProcessID() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-live-\(getpid())").path
        #expect(mkdir(directory, 0o755) == 0)
        defer { rmdir(directory) }
        #expect(!PacketCage.isHeld(directory))
        let held = PacketCage.lockLive(directory)
        #expect(held >= 0)
        #expect(PacketCage.isHeld(directory), "held by a live run")
        #expect(PacketCage.lockLive(directory) == -1, "a second run of the same name cannot take it")
        close(held)
        #expect(!PacketCage.isHeld(directory), "its run ended")
        #expect(!PacketCage.isHeld(directory + "-none"))
    }
}
