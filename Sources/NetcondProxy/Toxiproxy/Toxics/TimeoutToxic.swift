import NIOCore
import NetcondCore

/// Toxiproxy's `timeout`: nothing passes (data is dropped), and the stream is closed once
/// `timeout` passes without a chunk (0: never). Each chunk starts the clock again. Under
/// `--netcond-link` (`onLink`) the link holds the data instead (a stall), and the toxic only
/// closes the stream. Taking it away closes the stream it held, as Toxiproxy 2.12 does (on a
/// netcond link, the held data is delivered instead, as a network delivers after an outage).
///
/// ```
///   start ──x──────── T ───────▶ close     (x: a chunk, dropped; T counted from the last one)
/// ```
struct TimeoutToxic: Equatable {
    let timeout: TimeAmount
    let onLink: Bool

    init(timeout: TimeAmount, onLink: Bool = false) {
        self.timeout = timeout
        self.onLink = onLink
    }
}

extension TimeoutToxic: ToxicBehaviour {
    mutating func start(now: NIODeadline) -> [ToxicAction] {
        self.timeout > .zero ? [.alarm(at: now + self.timeout)] : []
    }

    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard case .data = piece else { return [.pass(piece)] }
        let clock = self.start(now: now)
        return clock + (self.onLink ? [.pass(piece)] : [.drop(bytes: piece.bytes)])
    }

    mutating func wake(now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        [.cut(.close)]
    }

    var closesWhenRemoved: Bool { !self.onLink }
}
