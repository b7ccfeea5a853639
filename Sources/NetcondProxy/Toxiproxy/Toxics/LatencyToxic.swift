import NIOCore
import NetcondCore

/// Toxiproxy's `latency`: each chunk goes on `latency` ± `jitter` (uniform, whole milliseconds)
/// after the moment it was read, never before the chunk ahead of it; the end goes on behind them.
///
/// ```
///   read:   a───────b
///   out:    ·········[L]a───────b      (each from its own read: b at its read + L, not a's + 2L)
/// ```
struct LatencyToxic: Equatable {
    let latency: TimeAmount
    let jitter: TimeAmount
    /// The chunk waiting for its moment.
    var held: ToxicPiece?

    init(latency: TimeAmount, jitter: TimeAmount) {
        self.latency = latency
        self.jitter = jitter
    }
}

extension LatencyToxic: HoldsOnePiece {
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard case .data(let buffer, let stamp) = piece else { return [.pass(piece)] }
        var milliseconds = self.latency.nanoseconds / 1_000_000
        let jitter = self.jitter.nanoseconds / 1_000_000
        if jitter > 0 { milliseconds += Int64.random(in: 0..<(2 * jitter), using: &random) - jitter }
        let due = stamp + .milliseconds(milliseconds)
        let moved = ToxicPiece.data(buffer, stamp: max(due, stamp))
        guard due > now else { return [.pass(moved)] }
        self.held = moved
        return [.hold(until: due)]
    }
}
