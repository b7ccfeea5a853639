/// The only source of randomness in netcond: a seeded xoshiro256** generator.
///
/// One run seed (`--seed`, `NETCOND_SEED`) is split into independent streams with `SeedDeriver`, one
/// per connection, direction and purpose, so that adding jitter to a profile never changes which
/// segments are lost, and connection 3's decisions do not depend on what connection 2 did.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    public init(seed: UInt64) {
        var mixer = SplitMix64(state: seed)
        self.state = (mixer.next(), mixer.next(), mixer.next(), mixer.next())
    }

    public mutating func next() -> UInt64 {
        let result = rotateLeft(self.state.1 &* 5, 7) &* 9
        let t = self.state.1 << 17
        self.state.2 ^= self.state.0
        self.state.3 ^= self.state.1
        self.state.1 ^= self.state.2
        self.state.0 ^= self.state.3
        self.state.2 ^= t
        self.state.3 = rotateLeft(self.state.3, 45)
        return result
    }

    /// A uniform value in [0, 1).
    public mutating func nextUnit() -> Double {
        Double(self.next() >> 11) * 0x1.0p-53
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool {
        if p <= 0 { return false }
        if p >= 1 { return true }
        return self.nextUnit() < p
    }
}

/// Derives independent, reproducible seeds from a run seed and a path of labels.
public enum SeedDeriver {
    public static func derive(_ seed: UInt64, _ labels: UInt64...) -> UInt64 {
        var mixer = SplitMix64(state: seed)
        var value = mixer.next()
        for label in labels {
            var step = SplitMix64(state: value ^ (label &* 0x9E37_79B9_7F4A_7C15))
            value = step.next()
        }
        return value
    }
}

/// SplitMix64, used to expand seeds.
struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@inline(__always)
private func rotateLeft(_ x: UInt64, _ k: UInt64) -> UInt64 {
    (x << k) | (x >> (64 - k))
}
