/// Propagation delay of one direction of the link: latency plus jitter, never reordering.
///
/// ```
///  leaves link  t0 ───────── latency ─────────▶ t0 + latency + U(0, jitter)
///  next segment    t1 ──── latency ──── ▶ max(t1 + latency + U(0, jitter), previous arrival)
/// ```
/// Latency is the minimum one-way delay; jitter adds up to that much on top, drawn per segment
/// from the direction's own seeded stream. A packet never overtakes the one before it (jitter is
/// variation of the path's delay, not reordering: that is ``Reordering``).
struct DelayLine {
    private(set) var latency: Span
    private(set) var jitter: Span
    private var random: SeededRandom
    private var lastArrival: Instant = .zero

    init(latency: Span, jitter: Span, seed: UInt64) {
        self.latency = latency
        self.jitter = jitter
        self.random = SeededRandom(seed: seed)
    }

    /// New latency and jitter apply to segments that leave from now on; a segment still never
    /// overtakes one that left before the change (a shorter path does not reorder the stream).
    mutating func reconfigure(latency: Span, jitter: Span) {
        self.latency = latency
        self.jitter = jitter
    }

    /// When a segment that left the link at `departure` reaches the other end.
    mutating func arrival(departingAt departure: Instant) -> Instant {
        var arrival = departure + self.latency
        if self.jitter > .zero {
            arrival = arrival + Span(nanoseconds: Int64(self.random.nextUnit() * Double(self.jitter.nanoseconds)))
        }
        if arrival < self.lastArrival { arrival = self.lastArrival }
        self.lastArrival = arrival
        return arrival
    }

    /// Packets that will arrive after `moment` are held back by `length` (a stall): so are the
    /// ones behind them.
    mutating func shift(after moment: Instant, by length: Span) {
        if self.lastArrival > moment { self.lastArrival = self.lastArrival + length }
    }
}
