import NIOCore

/// The origin's file content: an endless, seeded, reproducible byte stream.
///
/// Byte `i` is a pure function of `(seed, i)`. The stream is cut into 8-byte little-endian words and word `w` is
/// SplitMix64 in counter mode — its finaliser applied to `seed + (w + 1) · γ` — so any slice can be generated without
/// its prefix, cheaply (two multiplies per 8 bytes). Range responses, resumed downloads and the checks that
/// compare a client's output with what the origin served all agree on the same bytes.
///
/// ```
/// offset:  0        8        16       24
///          │ word 0 │ word 1 │ word 2 │ …     word w = splitmix64(seed &+ (w + 1) &* γ), stored little-endian
/// ```
public struct DeterministicBytes: Hashable, Sendable {
    /// Chooses which stream; `/bytes/{size}?seed=N` serves stream `N`.
    public let seed: UInt64

    public init(seed: UInt64 = 0) {
        self.seed = seed
    }

    /// The 8-byte word that holds bytes `8·index ..< 8·index + 8`.
    @inlinable
    public func word(at index: UInt64) -> UInt64 {
        var z = self.seed &+ (index &+ 1) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The byte at `offset` (≥ 0).
    public func byte(at offset: Int64) -> UInt8 {
        precondition(offset >= 0, "negative offset \(offset)")
        let word = self.word(at: UInt64(offset) / 8)
        return UInt8(truncatingIfNeeded: word >> ((UInt64(offset) % 8) * 8))
    }

    /// Writes bytes `offset ..< offset + destination.count` of the stream into `destination`.
    public func fill(_ destination: UnsafeMutableRawBufferPointer, offset: Int64) {
        precondition(offset >= 0, "negative offset \(offset)")
        let count = destination.count
        guard count > 0 else { return }
        var position = 0
        var wordIndex = UInt64(offset) / 8
        let skip = Int(UInt64(offset) % 8)
        if skip != 0 {
            let word = self.word(at: wordIndex)
            let take = min(8 - skip, count)
            for k in 0..<take {
                destination[k] = UInt8(truncatingIfNeeded: word >> (UInt64(skip + k) * 8))
            }
            position = take
            wordIndex += 1
        }
        while count - position >= 8 {
            destination.storeBytes(of: self.word(at: wordIndex).littleEndian, toByteOffset: position, as: UInt64.self)
            position += 8
            wordIndex += 1
        }
        if position < count {
            let word = self.word(at: wordIndex)
            for k in 0..<(count - position) {
                destination[position + k] = UInt8(truncatingIfNeeded: word >> (UInt64(k) * 8))
            }
        }
    }

    /// Appends bytes `offset ..< offset + count` of the stream to `buffer`.
    public func fill(into buffer: inout ByteBuffer, offset: Int64, count: Int) {
        precondition(count >= 0, "negative count \(count)")
        guard count > 0 else { return }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
            self.fill(UnsafeMutableRawBufferPointer(rebasing: pointer[0..<count]), offset: offset)
            return count
        }
    }

    /// Bytes `offset ..< offset + count` of the stream as an array (for tests and checks).
    public func bytes(offset: Int64, count: Int) -> [UInt8] {
        precondition(count >= 0, "negative count \(count)")
        return [UInt8](unsafeUninitializedCapacity: count) { pointer, initialized in
            self.fill(UnsafeMutableRawBufferPointer(pointer), offset: offset)
            initialized = count
        }
    }

    /// Compares `data` with the stream starting at `offset`; returns the stream offset of the first byte that differs,
    /// or `nil` when every byte of `data` matches. (A shorter `data` that matches is not a mismatch: compare lengths
    /// separately.)
    public func firstMismatch<Bytes: Collection<UInt8>>(in data: Bytes, offset: Int64) -> Int64? {
        let chunkSize = 64 * 1024
        var expected: [UInt8] = []
        var expectedIndex = 0
        var position = offset
        for actual in data {
            if expectedIndex == expected.count {
                expected = self.bytes(offset: position, count: chunkSize)
                expectedIndex = 0
            }
            if actual != expected[expectedIndex] {
                return position
            }
            expectedIndex += 1
            position += 1
        }
        return nil
    }
}
