import NIOCore
import NetcondCore

/// Toxiproxy's `noop`: everything goes on as it came (its placeholder type).
///
/// ```
///   a b end ▶ a b end
/// ```
struct NoopToxic: Equatable {}

extension NoopToxic: ToxicBehaviour {
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        [.pass(piece)]
    }
}
