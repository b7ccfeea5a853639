/// Decides, one transmission at a time, whether a segment is lost on the wire.
///
/// Bernoulli: every segment independently with probability p.
/// Gilbert–Elliott: a two-state chain that produces bursts.
///
/// ```
///   good ──p──▶ bad        loss probability lossInGood in good, lossInBad in bad
///   good ◀──r── bad        mean burst length 1/r segments
/// ```
/// Each direction of the link owns one process with its own seeded stream, as a real link has one
/// medium: a burst hits every connection crossing it then, not one connection alone. The same seed
/// and the same sequence of packets give the same losses.
struct LossProcess {
    private(set) var spec: LossSpec
    private var random: SeededRandom
    private var inBadState = false

    init(spec: LossSpec, seed: UInt64) {
        self.spec = spec
        self.random = SeededRandom(seed: seed)
    }

    /// A new loss process from now on, drawing from the same stream (so a run stays reproducible).
    /// A burst in progress ends with the change.
    mutating func reconfigure(_ spec: LossSpec) {
        guard spec != self.spec else { return }
        self.spec = spec
        self.inBadState = false
    }

    /// True when the next transmission is lost.
    mutating func nextIsLost() -> Bool {
        switch self.spec {
        case .none:
            return false
        case .bernoulli(let p):
            return self.random.chance(p.value)
        case .gilbertElliott(let p, let r, let lossInGood, let lossInBad):
            if self.inBadState {
                if self.random.chance(r.value) { self.inBadState = false }
            } else {
                if self.random.chance(p.value) { self.inBadState = true }
            }
            return self.random.chance(self.inBadState ? lossInBad.value : lossInGood.value)
        }
    }
}
