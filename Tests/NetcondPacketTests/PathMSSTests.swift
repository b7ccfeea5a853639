import Testing

@testable import NetcondPacket

/// The cage's sockets get a 1,500-byte path's MSS from a program on the cgroup; when it cannot be
/// attached the run goes on, and the reason is what the summary line will say.
@Suite struct PathMSSTests {
    @Test func aCgroupThatCannotTakeTheProgramGivesTheReason() {
        // No such cgroup (or, without CAP_BPF, no program at all): a reason, never a crash.
        let problem = PacketCage.givePathMSS("/sys/fs/cgroup/netcond-no-such-cgroup-\(Int.random(in: 1...1_000_000))")
        #expect(problem?.hasPrefix("cannot attach a BPF program to the cgroup: bpf: ") == true, "\(problem ?? "nil")")
    }
}
