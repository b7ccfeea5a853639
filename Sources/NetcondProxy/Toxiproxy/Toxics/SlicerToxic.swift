import NIOCore
import NetcondCore

/// Toxiproxy's `slicer`: a chunk goes on in pieces near `averageSize` bytes, `delay` apart (a
/// pause after the last piece too; with no delay, every piece at once). A span longer than
/// `averageSize + sizeVariation` is halved (the middle moved by up to ± `sizeVariation`), and each
/// half again, until every piece is short enough. Every byte goes on.
///
/// ```
///   average 10 ± 4, delay 1 ms:  take 500 B ▶ 8 B ─1 ms─ 12 B ─1 ms─ 9 B ─1 ms─ … ─1 ms─ (next chunk)
/// ```
struct SlicerToxic: Equatable {
    let averageSize: Int
    let sizeVariation: Int
    let delay: TimeAmount
    /// What is left of the chunk, and the sizes of its pieces still to go.
    private var held: (buffer: ByteBuffer, stamp: NIODeadline, sizes: ArraySlice<Int>)?

    init(averageSize: Int, sizeVariation: Int, delay: TimeAmount) {
        self.averageSize = averageSize
        self.sizeVariation = sizeVariation
        self.delay = delay
    }

    static func == (a: SlicerToxic, b: SlicerToxic) -> Bool {
        a.averageSize == b.averageSize && a.sizeVariation == b.sizeVariation && a.delay == b.delay
            && a.held?.buffer == b.held?.buffer && a.held?.stamp == b.held?.stamp && a.held?.sizes == b.held?.sizes
    }

    /// The sizes of the pieces of `length` bytes, in order.
    static func sizes(length: Int, average: Int, variation: Int, random: inout SeededRandom) -> [Int] {
        var sizes: [Int] = []
        var spans = [(0, length)]
        while let (start, end) = spans.popLast() {
            if (end - start) - average <= variation || end - start < 2 {
                if end > start { sizes.append(end - start) }
                continue
            }
            var middle = start + (end - start) / 2
            if variation > 0 { middle += Int.random(in: 0..<(2 * variation), using: &random) - variation }
            middle = min(max(middle, start + 1), end - 1)
            spans.append((middle, end))
            spans.append((start, middle))
        }
        return sizes
    }

    private mutating func slice(_ buffer: ByteBuffer, stamp: NIODeadline, sizes: ArraySlice<Int>, now: NIODeadline)
        -> [ToxicAction]
    {
        var buffer = buffer
        var sizes = sizes
        var actions: [ToxicAction] = []
        while self.delay == .zero, let size = sizes.first, buffer.readableBytes > 0 {
            sizes = sizes.dropFirst()
            actions.append(.pass(.data(buffer.readSlice(length: min(size, buffer.readableBytes))!, stamp: stamp)))
            if buffer.readableBytes == 0 || sizes.isEmpty {
                return actions + (buffer.readableBytes > 0 ? [.drop(bytes: buffer.readableBytes)] : [])
            }
        }
        guard let size = sizes.popFirst(), buffer.readableBytes > 0 else {
            return actions + (buffer.readableBytes > 0 ? [.drop(bytes: buffer.readableBytes)] : [])
        }
        actions.append(.pass(.data(buffer.readSlice(length: min(size, buffer.readableBytes))!, stamp: stamp)))
        guard buffer.readableBytes > 0 else { return actions + [.pause(until: now + self.delay)] }
        self.held = (buffer, stamp, sizes)
        return actions + [.hold(until: now + self.delay)]
    }
}

extension SlicerToxic: ToxicBehaviour {
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard case .data(let buffer, let stamp) = piece else { return [.pass(piece)] }
        let sizes = Self.sizes(
            length: buffer.readableBytes, average: self.averageSize, variation: self.sizeVariation, random: &random)
        return self.slice(buffer, stamp: stamp, sizes: sizes[...], now: now)
    }

    mutating func wake(now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard let held = self.held else { return [] }
        self.held = nil
        return self.slice(held.buffer, stamp: held.stamp, sizes: held.sizes, now: now)
    }

    mutating func interrupt() -> [ToxicPiece]? {
        defer { self.held = nil }
        return self.held.map { [.data($0.buffer, stamp: $0.stamp)] } ?? []
    }
}
