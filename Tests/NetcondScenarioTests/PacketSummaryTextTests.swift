import NetcondCore
import Testing

@testable import NetcondPacket
@testable import NetcondScenario

/// The line a packet-engine run prints at the end: what crossed, what was lost and why, and what
/// netcond could not make exact, in words.
@Suite struct PacketSummaryTextTests {
    @Test func aCleanRunCountsPacketsAndLosesNone() {
        var summary = PacketSummary()
        summary.elapsed = .milliseconds(820)
        summary.directions[0].packets = 315
        summary.directions[0].bytes = 22_000
        summary.directions[1].packets = 389
        summary.directions[1].bytes = 506_100
        let text = packetSummaryText(profile: "lossy", seed: 4, summary)
        #expect(text.hasPrefix("lossy (packet engine): 0.82 s, up "), "\(text)")
        #expect(
            text.contains("in 315 packets") && text.contains("in 389 packets") && text.contains("no packet lost"),
            "\(text)")
        #expect(text.hasSuffix("(seed 4)"), "\(text)")
        #expect(!text.contains("MSS") && !text.contains("late"), "\(text)")
    }

    @Test func whatNetcondCouldNotMakeExactIsSaidWithItsCause() {
        var summary = PacketSummary()
        summary.pathMSSProblem = "cannot attach a BPF program to the cgroup: bpf: Operation not permitted"
        for late: Int64 in [200, 1_500, 2_000, 4_000] { summary.lateness.record(.microseconds(late)) }
        let text = packetSummaryText(profile: "edge", seed: 1, summary, idleDriver: .present("haltpoll"))
        #expect(
            text.contains(
                "the command's TCP sockets kept loopback's 64 KB MSS (cannot attach a BPF program to the cgroup: "
                    + "bpf: Operation not permitted): downloads from servers on this host open their receive window later than "
                    + "on a real 1,500-byte path"), "\(text)")
        #expect(
            text.contains("3 packets were released over 1 ms late (longest 4 ms): netcond's thread woke late"),
            "\(text)")
        #expect(text.contains("--low-latency helps"), "\(text)")
    }

    /// Where idle CPUs halt whatever `/dev/cpu_dma_latency` says, the line does not offer
    /// `--low-latency` as the cure.
    @Test func lateReleasesOnAMachineWithoutACPUIdleDriverDoNotPromiseLowLatency() {
        var summary = PacketSummary()
        summary.lateness.record(.microseconds(2_500))
        let text = packetSummaryText(profile: "edge", seed: 1, summary, idleDriver: .none)
        #expect(
            text.contains(
                "1 packet was released over 1 ms late (longest 2 ms): netcond's thread woke late (a busy machine, or idle "
                    + "CPUs halting: this machine has no cpuidle driver, so --low-latency cannot keep them polling)"),
            "\(text)")
        #expect(!text.contains("--low-latency helps"), "\(text)")
    }

    /// A refused ring changes nothing the client meets (the copies come the slower way): the line
    /// says it, the verdicts do not count it.
    @Test func aRefusedRingIsSaidButIsNoShortfall() {
        var summary = PacketSummary()
        summary.ringProblem = "Operation not permitted"
        let text = packetSummaryText(profile: "none", seed: 1, summary)
        #expect(
            text.contains(
                "the kernel refused netcond's ring for the copies of the packets it passes (Operation not permitted): "
                    + "they came through log groups instead"), "\(text)")
        #expect(packetShortfalls(summary).allSatisfy { !$0.contains("ring") })
    }

    @Test func theLineSaysWhichSenderTheServersUsed() {
        let same = SenderReport(wanted: "cubic", origin: "cubic", hostDefault: "bbr")
        let text = packetSummaryText(profile: "very-bad", seed: 2, PacketSummary(), sender: same)
        #expect(
            text.contains(
                ", the origin sends with cubic (the profile's tcp), other servers with their own "
                    + "(this host's default: bbr) (seed 2)"), "\(text)")
        let missing = SenderReport(wanted: "bbr", origin: "cubic", hostDefault: nil)
        #expect(
            missing.description
                == "the origin sends with cubic, not the profile's bbr (this kernel does not offer it), "
                + "other servers with their own")
        let unread = SenderReport(wanted: "cubic", origin: nil, hostDefault: "cubic")
        #expect(unread.description.hasPrefix("the origin's sender is unknown (the profile's tcp is cubic)"))
    }
}
