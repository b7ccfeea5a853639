/// Reordering on the packet link: with probability `chance` a packet is held back `gap` beyond its
/// latency, and the packets behind it overtake it; it holds none of them up (it does not go through
/// the delay line, which keeps the others in order).
///
/// ```
///  departs t0 ── latency ──────────▶ t0 + latency                 (the delay line: in order)
///  held   t1 ── latency + gap ─────▶ t1 + latency + gap           (overtaken by what departs before t1 + gap)
/// ```
struct Reordering {
    var chance: Probability
    var gap: Span

    /// The arrival of a packet that left the queue at `departure` when it is held back, else nil (the
    /// delay line decides). Draws from `random` only while reordering is on, so a link without it
    /// leaves the stream to the stages after it exactly as before.
    func heldBack(departingAt departure: Instant, latency: Span, random: inout SeededRandom) -> Instant? {
        guard self.chance.value > 0, random.chance(self.chance.value) else { return nil }
        return departure + latency + self.gap
    }
}
