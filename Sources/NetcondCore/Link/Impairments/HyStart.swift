/// HyStart's delay test, as Linux's CUBIC runs it: slow start ends before it overflows the
/// bottleneck, once the round trip of a round's first acknowledgements has grown past the path's
/// least round trip by an eighth of it (at least 4 ms, at most 16 ms) — the queue has begun to
/// fill. Without it a sender doubles its window until the queue overflows, loses a window's worth
/// of segments at once, and of two connections started together the one that lost more stays
/// behind for many seconds (the kernel's own senders through the same drop-tail queue share it
/// evenly).
///
/// ```
///  round n:   first 8 samples' least RTT = 41 ms ┐
///  path's least RTT so far             = 20 ms  ├─ 41 > 20 + max(4, min(16, 20/8)) ms: leave slow start
///                                               ┘
/// ```
/// Pure: the sender hands it each acknowledgement's sequence number, the next one it will send
/// (a round ends when what was outstanding at its start is acknowledged) and the RTT sample.
struct HyStart {
    /// The first sequence number sent after this round began (nil: no round yet).
    private var roundEnd: UInt64?
    private var roundMinimum: Span?
    private var samples = 0
    /// The least round trip seen on the connection.
    private(set) var minimum: Span?

    /// Linux: `hystart_low_window` (16 segments) and `HYSTART_MIN_SAMPLES` (8).
    static let lowWindow = 16.0
    static let samplesPerRound = 8

    /// Whether slow start should end at this acknowledgement (of `seq`, with `nextSeq` the next to
    /// be sent, a window of `segments`).
    mutating func shouldExit(seq: UInt64, nextSeq: UInt64, sample: Span?, segments: Double) -> Bool {
        if self.roundEnd.map({ seq >= $0 }) ?? true {
            self.roundEnd = nextSeq
            self.roundMinimum = nil
            self.samples = 0
        }
        guard let sample else { return false }
        self.minimum = min(self.minimum ?? sample, sample)
        if self.samples < Self.samplesPerRound {
            self.roundMinimum = min(self.roundMinimum ?? sample, sample)
            self.samples += 1
            return false
        }
        guard segments >= Self.lowWindow, let current = self.roundMinimum, let least = self.minimum else {
            return false
        }
        let threshold = min(max(Span(nanoseconds: least.nanoseconds / 8), .milliseconds(4)), .milliseconds(16))
        return current > least + threshold
    }
}
