import Testing

@testable import NetcondCore

/// The model against real TCP: reference figures measured through a packet-level emulator (12 Mbit/s,
/// loss on both directions, one stream). Virtual time, so these are exact for a seed; the tolerance
/// is the issue's ±30 % (model fidelity, not timing).
@Suite struct LossFidelityTests {
    struct Cell: CustomTestStringConvertible {
        var rttMilliseconds: Int64
        var loss: Double
        var tcp: CongestionControl
        /// Steady goodput in Mbit/s.
        var goodput: Double

        var testDescription: String { "\(self.rttMilliseconds) ms, \(self.loss * 100)% loss, \(self.tcp)" }
    }

    static let cells: [Cell] = [
        Cell(rttMilliseconds: 100, loss: 0, tcp: .bbr, goodput: 11.2),
        Cell(rttMilliseconds: 100, loss: 0, tcp: .cubic, goodput: 11.6),
        Cell(rttMilliseconds: 100, loss: 0.01, tcp: .bbr, goodput: 11.2),
        Cell(rttMilliseconds: 100, loss: 0.01, tcp: .cubic, goodput: 1.20),
        Cell(rttMilliseconds: 100, loss: 0.05, tcp: .bbr, goodput: 10.9),
        Cell(rttMilliseconds: 100, loss: 0.05, tcp: .cubic, goodput: 0.47),
        Cell(rttMilliseconds: 500, loss: 0, tcp: .bbr, goodput: 10.4),
        Cell(rttMilliseconds: 500, loss: 0, tcp: .cubic, goodput: 11.6),
        Cell(rttMilliseconds: 500, loss: 0.01, tcp: .bbr, goodput: 10.1),
        Cell(rttMilliseconds: 500, loss: 0.01, tcp: .cubic, goodput: 0.47),
        Cell(rttMilliseconds: 500, loss: 0.05, tcp: .bbr, goodput: 10.4),
        Cell(rttMilliseconds: 500, loss: 0.05, tcp: .cubic, goodput: 0.17),
    ]

    static func profile(_ cell: Cell) -> Profile {
        var profile = Profile.test(
            latency: .milliseconds(cell.rttMilliseconds / 2),
            bandwidth: .mbit(12),
            loss: cell.loss,
            tcp: cell.tcp
        )
        // 1000 packets, netem's default queue limit (the reference's packet-level emulator).
        profile.up.queue = ByteCount(bytes: 1500 * 1024)
        profile.down.queue = ByteCount(bytes: 1500 * 1024)
        return profile
    }

    @Test(arguments: cells)
    func steadyGoodputMatchesRealTCP(_ cell: Cell) {
        // A bulk download, measured after 10 s; a loss-bound cubic sawtooth needs many periods at 500 ms,
        // so those run 120 s (they are cheap: few segments), the link-bound ones 20 s.
        let measured: Double = cell.tcp == .cubic && cell.loss > 0 ? 120 : 20
        var sim = LinkSimulation(Self.profile(cell), seed: 7)
        let flow = sim.model.openFlow(at: .zero)
        _ = sim.bulk(flow, .down, total: 1 << 40, from: .zero, deadline: .s(10 + measured))
        let bytes = sim.delivered(flow, .down, by: .s(10 + measured)) - sim.delivered(flow, .down, by: .s(10))
        let goodput = Double(bytes) * 8 / measured / 1e6
        #expect(abs(goodput - cell.goodput) / cell.goodput <= 0.30, "goodput \(goodput) Mbit/s vs \(cell.goodput)")
    }

    /// Seconds to download 1 MB on a fresh connection: handshake, request, response.
    static func freshMegabyte(_ cell: Cell, seed: UInt64) -> Double? {
        var sim = LinkSimulation(Self.profile(cell), seed: seed)
        let flow = sim.model.openFlow(at: .zero)
        guard case .established = sim.connect(flow, at: .zero) else { return nil }
        // The request goes up; the response starts when it arrives.
        sim.model.send(flow, .up, bytes: 100, at: .zero)
        var requestArrived: Instant?
        while requestArrived == nil, let next = sim.model.nextEventTime {
            requestArrived = sim.model.advance(to: next).first { $0.direction == .up }?.at
        }
        let done = sim.bulk(flow, .down, total: 1 << 20, from: requestArrived ?? .zero, deadline: .s(300))
        return done.map { Double($0.nanoseconds) / 1e9 }
    }

    @Test(arguments: [
        (100 as Int64, 1.19, CongestionControl.bbr), (100, 1.16, .cubic), (500, 4.27, .bbr), (500, 4.09, .cubic),
    ])
    func freshMegabyteWithoutLossMatchesRealTCP(rtt: Int64, reference: Double, tcp: CongestionControl) {
        let seconds = Self.freshMegabyte(Cell(rttMilliseconds: rtt, loss: 0, tcp: tcp, goodput: 0), seed: 1) ?? 999
        #expect(abs(seconds - reference) / reference <= 0.30, "\(seconds) s vs \(reference) s")
    }

    /// Under random loss one download is luck: the time is bimodal (no loss early in slow start, or a
    /// slow climb after one), so medians of a few dozen runs move by ±13 % between sets. The mean over
    /// 101 seeds is compared with the mean of real Linux TCP measured on this machine through a
    /// per-packet emulator (`scripts/bench.d/tcp_reference.py`, 2026-11-25: cubic 100 ms 1 %: 3.69 s
    /// ± 0.53 over 80 runs; 100 ms 5 %: 17.28 s ± 1.49 over 40; bbr 100 ms 1 %: 1.37 s ± 0.06 over 40,
    /// each in four instances at once; 500 ms 1 %: 12.98 s over 61 runs of one instance). The issue's
    /// own figures for the two cubic 1 % cells (1.77 s, 8.35 s) are medians, below what this kernel takes
    /// (see the README).
    @Test(arguments: [
        (100 as Int64, 0.01, CongestionControl.cubic, 3.69), (500, 0.01, .cubic, 12.98), (100, 0.05, .cubic, 17.28),
        (100, 0.01, .bbr, 1.37),
    ])
    func freshMegabyteUnderLossMatchesTheKernelsMean(rtt: Int64, loss: Double, tcp: CongestionControl, kernel: Double) {
        let cell = Cell(rttMilliseconds: rtt, loss: loss, tcp: tcp, goodput: 0)
        let times = (1...101).map { Self.freshMegabyte(cell, seed: UInt64($0)) ?? 999 }
        let mean = times.reduce(0, +) / Double(times.count)
        #expect(abs(mean - kernel) / kernel <= 0.30, "mean \(mean) s vs the kernel's \(kernel) s")
    }
}
