import NetcondCore
import Testing

@testable import NetcondPacket

/// The bench judges the packet engine against the kernel through a reference emulator
/// (`scripts/bench.d/tcp_reference.py --netcond-draws`) that draws its losses from netcond's own
/// streams, so that one seed loses the same packets, by number, on both sides. These are the
/// numbers that script's own test pins for seed 301 and 5 % loss: if either side changes how it
/// seeds or draws, one of the two tests fails.
@Suite struct LinkSeedTests {
    static let expected: [[Int]] = [
        [67, 128, 136, 153, 170, 181, 215, 225, 273, 291],  // up
        [5, 7, 13, 19, 34, 36, 55, 70, 78, 117, 122, 141, 164, 168, 186, 223, 232, 242],  // down
    ]

    @Test(arguments: [0, 1])
    func eachDirectionLosesThePacketsTheReferenceEmulatorDraws(direction: Int) {
        var link = PacketLink(
            PacketImpairments(loss: .bernoulli(Probability(0.05))),
            seed: PacketEngine.linkSeed(301, direction: UInt64(direction)))
        let lost = (0..<300).filter { _ in
            if case .dropped(.lost) = link.decide(bytes: 1500, at: .zero).fate { return true }
            return false
        }
        #expect(lost == Self.expected[direction])
    }
}
