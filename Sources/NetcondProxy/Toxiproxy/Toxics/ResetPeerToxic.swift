import NIOCore
import NetcondCore

/// Toxiproxy's `reset_peer`: the next piece (a chunk, or the end) is taken and not passed on, and
/// `timeout` later (0: at once) the stream ends in a reset; what came meanwhile is dropped. It is
/// armed by data, not by time, and a reset under way is not stopped by an update or a removal
/// (Toxiproxy's wait cannot be cut short).
///
/// ```
///   take "GET" (dropped) ──── T ────▶ reset
/// ```
struct ResetPeerToxic: Equatable {
    let timeout: TimeAmount
    /// The first piece was taken: the reset is under way.
    private(set) var resetting = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }
}

extension ResetPeerToxic: ToxicBehaviour {
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        self.resetting = true
        return [.drop(bytes: piece.bytes), .pause(until: now + self.timeout)]
    }

    mutating func wake(now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard self.resetting else { return [] }
        self.resetting = false
        return [.cut(.reset)]
    }

    mutating func interrupt() -> [ToxicPiece]? {
        self.resetting ? nil : []
    }
}
