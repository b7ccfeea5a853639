import NIOCore
import NetcondCore

/// Toxiproxy's `slow_close`: data passes as it comes; the end of the stream is held `delay`.
///
/// ```
///   data ▶ data;   end ──── D ────▶ end
/// ```
struct SlowCloseToxic: Equatable {
    let delay: TimeAmount
    /// The end, held.
    var held: ToxicPiece?

    init(delay: TimeAmount) {
        self.delay = delay
    }
}

extension SlowCloseToxic: HoldsOnePiece {
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard case .end = piece else { return [.pass(piece)] }
        self.held = piece
        return [.hold(until: now + self.delay)]
    }
}
