import Testing

@testable import NetcondCore

/// The bench judges netcond against the kernel through a reference emulator
/// (`scripts/bench.d/tcp_reference.py --netcond-draws`) that draws its losses from netcond's own
/// streams, so that one seed loses the same packets, by number, on both sides. These are the
/// numbers that script's own test pins for seed 301 and 5 % loss: if either side changes how it
/// seeds or draws, one of the two tests fails. Both engines seed their paths this way.
@Suite struct LinkSeedTests {
    static let expected: [[Int]] = [
        [67, 128, 136, 153, 170, 181, 215, 225, 273, 291],  // up
        [5, 7, 13, 19, 34, 36, 55, 70, 78, 117, 122, 141, 164, 168, 186, 223, 232, 242],  // down
    ]

    @Test(arguments: [Direction.up, .down])
    func eachDirectionLosesThePacketsTheReferenceEmulatorDraws(direction: Direction) {
        var path = LinkPath<Int, Int>(
            LinkDirection(loss: .bernoulli(Probability(0.05))),
            seed: SeedDeriver.linkPath(301, direction))
        let lost = (0..<300).filter { index in
            path.offer(index, bytes: 1500, connection: nil, at: .zero) == .dropped(.lost)
        }
        #expect(lost == Self.expected[direction == .up ? 0 : 1])
    }
}
