import CNetcondPacket
import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// The cage's nft rules (see ``PacketCage``), and the ring that copies the packets the kernel
/// passes in the cage's own sockets' path.
extension PacketCage {
    /// This run's chains, and the rules in the base chains that lead to them.
    func ruleset(root: String) -> String {
        let relative = root.hasPrefix("/sys/fs/cgroup/") ? String(root.dropFirst("/sys/fs/cgroup/".count)) + "/" : ""
        // Level 1: the cgroup is a child of the hierarchy's root.
        let mark = Self.hex(self.mark)
        let down = Self.hex(self.mark | Self.downBit)
        let passed = Self.hex(Self.passedBit)
        let cgroup = "socket cgroupv2 level 1 \"\(relative)\(self.name)\""
        let clamp = """
                meta nfproto ipv4 tcp flags syn tcp option maxseg size > 1460 tcp option maxseg size set 1460
                meta nfproto ipv6 tcp flags syn tcp option maxseg size > 1440 tcp option maxseg size set 1440
            """
        let t = Self.table
        let p = self.chainPrefix
        // IPv6-only: what slips past the sockets' refusal (``refuseIPv4()``: a ping, a raw
        // socket) meets no route; a server's answer to the run's NAT64 pool goes down the link.
        let ipv4Refused =
            self.ipv6Only ? "    \(cgroup) meta nfproto ipv4 reject with icmp type net-unreachable" : ""
        let poolDown =
            self.ipv6Only
            ? "    ip daddr \(AddressBlock.format(NAT64.pool(slot: self.slot)))/26 goto \(p)_down" : ""
        let comment = "comment \"\(self.name)\""
        let passingSet = self.logGroup == nil ? "" : "  set \(p)_passing { type mark; }"
        // A link chain: a packet that has crossed already goes on; else its SYN's MSS clamped,
        // the run's mark of its side, and the kernel passes it at once while the set says so.
        func link(_ name: String, _ mark: String, group: UInt16, ring: Bool) -> String {
            """
              chain \(p)_\(name) {
                meta mark & \(passed) == \(passed) return
            \(clamp)
                meta mark set \(mark)
            \(self.passingRule(group: group, ring: ring))
              }
            """
        }
        // With the ring, the packets the kernel passes are copied by the cgroup's programs, which
        // see only the cage's own sockets' packets after the hooks: a packet to this host is then
        // decided on output (up_local: on input it would reach a socket outside the cage), and
        // what has no socket of the cage (a server's packet on input, ICMP on output) keeps the log.
        let ringed = self.ring != nil
        let ringChains =
            !ringed
            ? ""
            : link("up_in", mark, group: 0, ring: false) + "\n" + link("down_out", down, group: 1, ring: false) + """

                  chain \(p)_up_local {
                \(clamp)
                    meta mark set \(mark)
                \(self.passingRule(group: 0, ring: true)) return
                    meta mark set 0x00000000
                  }
                """
        let ruleset =
            Self.baseChains + """
                table inet \(t) {
                \(passingSet)
                \(link("up", mark, group: 0, ring: ringed))
                \(link("down", down, group: 1, ring: ringed))
                \(ringChains)
                  chain \(p)_output {
                \(ipv4Refused)
                    \(cgroup) ct mark set \(mark)
                    \(cgroup) fib daddr type local \(ringed ? "goto \(p)_up_local" : "return")
                    \(cgroup) goto \(p)_up
                    ct mark \(mark) meta l4proto { icmp, ipv6-icmp } goto \(p)_\(ringed ? "down_out" : "down")
                  }
                  chain \(p)_input {
                \(poolDown)
                    \(cgroup) goto \(p)_down
                    ct mark \(mark) goto \(p)_\(ringed ? "up_in" : "up")
                  }
                  chain \(p)_captive {
                  }
                }
                add rule inet \(t) output jump \(p)_output \(comment)
                add rule inet \(t) input jump \(p)_input \(comment)
                add rule inet \(t) captive_nat ct mark \(mark) jump \(p)_captive \(comment)

                """
        return ruleset
    }

    static func hex(_ value: UInt32) -> String { String(format: "0x%08x", value) }

    /// The ring's mark bit: a packet the kernel passed whose copy the cage's BPF programs take
    /// (the queues' rules ignore bits 0–5).
    static let ringBit: UInt32 = 0x01
    /// The ring's size: 4 MB, about 26,000 copies, over 50 ms of a 1 Gbit/s link's full-size
    /// packets (the engine reads it every 2 ms).
    static let ringSize: UInt32 = 1 << 22

    /// The ring and its programs on the cage's cgroup, or why the kernel refused them (the log
    /// groups then get every copy, as before the ring: the same link, more of the machine's time).
    /// No verifier log is asked for: with one, a load whose log overflows it fails.
    func openRing() -> Result<OpaquePointer, RingRefusal> {
        var error: Int32 = 0
        let ring = ncq_ring_open(
            self.cgroupDirectory, self.mark | Self.passedBit | Self.ringBit,
            self.mark | Self.downBit | Self.passedBit | Self.ringBit, Self.ringSize, &error, nil, 0)
        if let ring { return .success(ring) }
        return .failure(RingRefusal(errno: -error))
    }

    /// Why the kernel refused the ring: the error of the call that failed (creating the ring,
    /// loading or attaching a program).
    struct RingRefusal: Error, CustomStringConvertible {
        var errno: Int32

        var description: String {
            self.errno > 0 ? String(cString: strerror(self.errno)) : "no reason given"
        }
    }
}
