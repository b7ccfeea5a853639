import NIOCore
import NetcondCore

/// Toxiproxy's `bandwidth`: at most `rate` KB/s (1 KB = 1,000 bytes) of payload on the stream
/// (0: no limit). A chunk of n bytes goes on once the n / rate it owes has passed since the toxic
/// took it; one larger than 100 ms of data goes on a 100 ms piece at a time. A timer that fires
/// late has its overshoot taken off the next sleep (the debt goes below 0).
///
/// ```
///   rate 10 KB/s:  take 500 B ──50 ms──▶ 500 B
///                  take 2,500 B ─100 ms─▶ 1,000 B ─100 ms─▶ 1,000 B ─50 ms─▶ 500 B
/// ```
struct BandwidthToxic: Equatable {
    /// KB/s (1,000 bytes a second per unit; 0: no limit).
    let rate: Int64
    /// The sleep owed, in nanoseconds (below 0: a late timer made up).
    private(set) var owed: Int64 = 0
    private var held: (buffer: ByteBuffer, stamp: NIODeadline, phase: Phase)?

    private enum Phase: Equatable {
        /// A 100 ms piece goes at the wake.
        case piece
        /// The rest goes at the wake; the sleep began at `since`.
        case rest(since: NIODeadline)
    }

    init(rate: Int64) {
        self.rate = rate
    }

    static func == (a: BandwidthToxic, b: BandwidthToxic) -> Bool {
        a.rate == b.rate && a.owed == b.owed && a.held?.buffer == b.held?.buffer && a.held?.stamp == b.held?.stamp
            && a.held?.phase == b.held?.phase
    }

    /// Bytes in a 100 ms piece.
    private var pieceBytes: Int { Int(min(Int64(Int32.max), self.rate * 100)) }

    private mutating func pace(_ buffer: ByteBuffer, stamp: NIODeadline, now: NIODeadline) -> [ToxicAction] {
        if buffer.readableBytes > self.pieceBytes {
            self.held = (buffer, stamp, .piece)
            return [.hold(until: now + .milliseconds(100))]
        }
        guard self.owed > 0 else { return [.pass(.data(buffer, stamp: stamp))] }
        self.held = (buffer, stamp, .rest(since: now))
        return [.hold(until: now + .nanoseconds(self.owed))]
    }
}

extension BandwidthToxic: ToxicBehaviour {
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard case .data(let buffer, let stamp) = piece, self.rate > 0 else { return [.pass(piece)] }
        self.owed += Int64(buffer.readableBytes) * 1_000_000 / self.rate
        return self.pace(buffer, stamp: stamp, now: now)
    }

    mutating func wake(now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard let held = self.held else { return [] }
        self.held = nil
        let stamp = held.stamp
        switch held.phase {
        case .piece:
            var rest = held.buffer
            let first = rest.readSlice(length: self.pieceBytes)!
            self.owed -= 100_000_000
            return [.pass(.data(first, stamp: stamp))] + self.pace(rest, stamp: stamp, now: now)
        case .rest(let since):
            self.owed -= (now - since).nanoseconds
            return [.pass(.data(held.buffer, stamp: stamp))]
        }
    }

    mutating func interrupt() -> [ToxicPiece]? {
        defer { self.held = nil }
        return self.held.map { [.data($0.buffer, stamp: $0.stamp)] } ?? []
    }
}
