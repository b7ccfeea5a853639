import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// A writer's promise through the chain (the forward's writes downstream): kept once the last byte
/// of its chunk is written on, or at once when a toxic drops the chunk.
@Suite struct ToxicChainPromiseTests {
    final class Log {
        var delivered: [(ms: Int64, bytes: Int)] = []
        var kept: [Int64] = []
    }

    func run(_ kind: Toxic.Kind, bytes: Int, advance: TimeAmount) -> Log {
        let loop = EmbeddedEventLoop()
        let start = loop.now
        let log = Log()
        let ms = { (loop.now - start).nanoseconds / 1_000_000 }
        let chain = ToxicChain(stream: .downstream, seed: 1, eventLoop: loop) { item in
            if case .data(let buffer, _, let promise) = item {
                log.delivered.append((ms(), buffer.readableBytes))
                promise?.succeed()
            }
        }
        chain.setToxics([Toxic(name: "t", stream: .downstream, kind: kind)])
        let promise = loop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenSuccess { log.kept.append(ms()) }
        chain.push(.data(ByteBuffer(string: String(repeating: "p", count: bytes)), stamp: loop.now, promise: promise))
        loop.advanceTime(by: advance)
        #expect(chain.heldBytes == 0)
        return log
    }

    @Test func aPacedChunksPromiseIsKeptWithItsLastPiece() {
        let log = self.run(.bandwidth(rate: 10), bytes: 2_500, advance: .seconds(1))
        #expect(log.delivered.map(\.ms) == [100, 200, 250] && log.delivered.map(\.bytes) == [1_000, 1_000, 500])
        #expect(log.kept == [250])
    }

    @Test func aSlicedChunksPromiseIsKeptWithItsLastPiece() {
        let log = self.run(.slicer(averageSize: 10, sizeVariation: 0, delay: 1_000), bytes: 40, advance: .seconds(1))
        #expect(log.delivered.map(\.ms) == [0, 1, 2, 3] && log.kept == [3])
    }

    @Test func aDroppedChunksPromiseIsKeptAtOnce() {
        #expect(self.run(.timeout(timeout: 0), bytes: 10, advance: .seconds(1)).kept == [0])
        let reset = self.run(.resetPeer(timeout: 500), bytes: 10, advance: .seconds(1))
        #expect(reset.delivered.isEmpty && reset.kept == [0])
    }

    @Test func aCutChunksPromiseGoesWithWhatPassed() {
        let log = self.run(.limitData(bytes: 4), bytes: 10, advance: .zero)
        #expect(log.delivered.map(\.bytes) == [4] && log.kept == [0])
    }
}
