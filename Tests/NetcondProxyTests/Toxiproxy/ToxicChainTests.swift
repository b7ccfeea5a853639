import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// One stream through its toxics as Toxiproxy runs them, in virtual time: when each chunk leaves
/// the chain, how the stream ends, and what an update or a removal does to what a stage holds.
@Suite struct ToxicChainTests {
    final class Out {
        var items: [(ms: Int64, text: String)] = []
        var ends: [(ms: Int64, ending: ToxicChain.Ending)] = []
        /// Data and ends in the order they left.
        var order: [String] = []
    }

    func chain(_ toxics: [Toxic], seed: UInt64 = 1) -> (ToxicChain, EmbeddedEventLoop, Out) {
        let loop = EmbeddedEventLoop()
        let start = loop.now
        let out = Out()
        let chain = ToxicChain(stream: .downstream, seed: seed, eventLoop: loop) { item in
            let ms = (loop.now - start).nanoseconds / 1_000_000
            switch item {
            case .data(let buffer, _, let promise):
                out.items.append((ms, String(buffer: buffer)))
                out.order.append(String(buffer: buffer))
                promise?.succeed()
            case .end(let ending):
                out.ends.append((ms, ending))
                out.order.append("end")
            }
        }
        chain.setToxics(toxics)
        return (chain, loop, out)
    }

    func push(_ chain: ToxicChain, _ loop: EmbeddedEventLoop, _ text: String) {
        chain.push(.data(ByteBuffer(string: text), stamp: loop.now, promise: nil))
    }

    func toxic(_ kind: Toxic.Kind, name: String = "t", toxicity: Double = 1) -> Toxic {
        Toxic(name: name, stream: .downstream, toxicity: toxicity, kind: kind)
    }

    @Test func latencyDelaysEachChunkFromWhenItWasReadAndTheEndGoesBehind() {
        let (chain, loop, out) = self.chain([self.toxic(.latency(latency: 100, jitter: 0))])
        self.push(chain, loop, "a")
        loop.advanceTime(by: .milliseconds(30))
        self.push(chain, loop, "b")
        chain.push(.end(.eof))
        loop.advanceTime(by: .milliseconds(69))
        #expect(out.items.isEmpty)
        loop.advanceTime(by: .milliseconds(1))
        #expect(out.items.map(\.ms) == [100])
        loop.advanceTime(by: .milliseconds(30))
        // Each from its own read: b at 130, not 200; the end right behind it.
        #expect(out.items.map(\.ms) == [100, 130] && out.items.map(\.text) == ["a", "b"])
        #expect(out.ends.map(\.ms) == [130] && out.ends.first?.ending == .eof)
    }

    @Test func latenciesAddUpAndJitterStaysWithinItsRange() {
        let (chain, loop, out) = self.chain([
            self.toxic(.latency(latency: 50, jitter: 0), name: "a"),
            self.toxic(.latency(latency: 100, jitter: 20), name: "b"),
        ])
        for _ in 0..<50 {
            self.push(chain, loop, "x")
            loop.advanceTime(by: .milliseconds(500))
        }
        let delays = out.items.enumerated().map { $0.element.ms - Int64($0.offset) * 500 }
        #expect(delays.count == 50)
        #expect(delays.allSatisfy { (130...170).contains($0) }, "\(delays)")
        #expect(Set(delays).count > 5, "jitter varies: \(delays)")
    }

    @Test func bandwidthPacesEachChunkAndCutsALargeOneInto100MillisecondPieces() {
        // 10 KB/s: 10 bytes a millisecond; a piece is 1,000 bytes.
        let (chain, loop, out) = self.chain([self.toxic(.bandwidth(rate: 10))])
        self.push(chain, loop, String(repeating: "s", count: 500))
        loop.advanceTime(by: .milliseconds(49))
        #expect(out.items.isEmpty)
        loop.advanceTime(by: .milliseconds(1))
        #expect(out.items.map(\.ms) == [50])
        self.push(chain, loop, String(repeating: "L", count: 2_500))
        loop.advanceTime(by: .seconds(1))
        #expect(out.items.map(\.ms) == [50, 150, 250, 300], "\(out.items.map(\.ms))")
        #expect(out.items.map(\.text.count) == [500, 1_000, 1_000, 500])
        // 0: no limit.
        let (free, freeLoop, freeOut) = self.chain([self.toxic(.bandwidth(rate: 0))])
        self.push(free, freeLoop, String(repeating: "f", count: 100_000))
        #expect(freeOut.items.map(\.ms) == [0])
    }

    @Test func timeoutDropsDataAndClosesOnceItsTimePassesWithoutAChunk() {
        let (chain, loop, out) = self.chain([self.toxic(.timeout(timeout: 300))])
        loop.advanceTime(by: .milliseconds(200))
        self.push(chain, loop, "dropped")
        loop.advanceTime(by: .milliseconds(299))
        #expect(out.ends.isEmpty)
        loop.advanceTime(by: .milliseconds(1))
        #expect(out.items.isEmpty && out.ends.map(\.ms) == [500] && out.ends.first?.ending == .close)
        // 0: data dropped, never closed.
        let (never, neverLoop, neverOut) = self.chain([self.toxic(.timeout(timeout: 0))])
        self.push(never, neverLoop, "x")
        neverLoop.advanceTime(by: .seconds(600))
        #expect(neverOut.items.isEmpty && neverOut.ends.isEmpty)
    }

    @Test func takingATimeoutAwayClosesTheStreamAndTakingALatencyAwayHandsOnWhatItHeld() {
        let timeout = self.toxic(.timeout(timeout: 0))
        let (chain, loop, out) = self.chain([timeout])
        self.push(chain, loop, "x")
        loop.advanceTime(by: .seconds(5))
        chain.setToxics([])
        #expect(out.items.isEmpty && out.ends.map(\.ending) == [.close])

        let (held, heldLoop, heldOut) = self.chain([self.toxic(.latency(latency: 1_000, jitter: 0))])
        self.push(held, heldLoop, "a")
        self.push(held, heldLoop, "b")
        heldLoop.advanceTime(by: .milliseconds(100))
        held.setToxics([])
        #expect(heldOut.items.map(\.text) == ["a", "b"] && heldOut.items.map(\.ms) == [100, 100])
        #expect(heldOut.ends.isEmpty)
    }

    @Test func anAddedToxicActsOnWhatComesNextAndAnUpdateCutsItsWaitShort() {
        let (chain, loop, out) = self.chain([])
        self.push(chain, loop, "before")
        let slow = self.toxic(.latency(latency: 500, jitter: 0))
        chain.setToxics([slow])
        self.push(chain, loop, "after")
        loop.advanceTime(by: .milliseconds(100))
        #expect(out.items.map(\.text) == ["before"])
        chain.setToxics([self.toxic(.latency(latency: 50, jitter: 0))])
        // Handed on at the update ("no data on the floor"), then the new latency for what follows.
        #expect(out.items.map(\.text) == ["before", "after"] && out.items.map(\.ms) == [0, 100])
        self.push(chain, loop, "next")
        loop.advanceTime(by: .milliseconds(50))
        #expect(out.items.last.map { $0.text == "next" && $0.ms == 150 } == true)
    }

    @Test func resetPeerTakesTheFirstChunkAndResetsItsTimeLater() {
        let (chain, loop, out) = self.chain([self.toxic(.resetPeer(timeout: 200))])
        loop.advanceTime(by: .seconds(3))
        #expect(out.ends.isEmpty)  // armed by data, not by time
        self.push(chain, loop, "taken")
        self.push(chain, loop, "waits")
        loop.advanceTime(by: .milliseconds(199))
        #expect(out.ends.isEmpty)
        loop.advanceTime(by: .milliseconds(1))
        #expect(out.items.isEmpty && out.ends.map(\.ending) == [.reset] && out.ends.map(\.ms) == [3_200])
        // An end of stream arms it too.
        let (ended, endedLoop, endedOut) = self.chain([self.toxic(.resetPeer(timeout: 100))])
        ended.push(.end(.eof))
        endedLoop.advanceTime(by: .milliseconds(100))
        #expect(endedOut.ends.map(\.ending) == [.reset])
    }

    @Test func limitDataPassesExactlyItsBytesThenEndsAndSlowCloseHoldsTheEnd() {
        let (chain, loop, out) = self.chain([
            self.toxic(.limitData(bytes: 10), name: "l"), self.toxic(.slowClose(delay: 300), name: "c"),
        ])
        self.push(chain, loop, "0123456")
        self.push(chain, loop, "789abcdef")
        self.push(chain, loop, "gone")
        #expect(out.items.map(\.text) == ["0123456", "789"])
        loop.advanceTime(by: .milliseconds(299))
        #expect(out.ends.isEmpty)
        loop.advanceTime(by: .milliseconds(1))
        #expect(out.ends.map(\.ending) == [.close] && out.ends.map(\.ms) == [300])
        #expect(chain.heldBytes == 0)
    }

    @Test func slicerHalvesAChunkUntilEachPieceIsShortEnoughAndKeepsEveryByte() {
        let (chain, loop, out) = self.chain([self.toxic(.slicer(averageSize: 10, sizeVariation: 4, delay: 1_000))])
        let text = String((0..<500).map { Character(UnicodeScalar(UInt8(65 + $0 % 26))) })
        self.push(chain, loop, text)
        loop.advanceTime(by: .seconds(1))
        #expect(out.items.map(\.text).joined() == text)
        #expect(out.items.allSatisfy { (1...14).contains($0.text.count) }, "\(out.items.map(\.text.count))")
        // One piece a millisecond.
        #expect(out.items.map(\.ms) == Array(0..<Int64(out.items.count)))
    }

    @Test func toxicityPicksConnectionsBySeedAndAboutItsShare() {
        func picked(seed: UInt64) -> Bool {
            let (chain, loop, out) = self.chain(
                [self.toxic(.latency(latency: 100, jitter: 0), toxicity: 0.3)], seed: seed)
            self.push(chain, loop, "x")
            return out.items.isEmpty
        }
        let picks = (1...200).map { picked(seed: UInt64($0)) }
        #expect((1...200).map { picked(seed: UInt64($0)) } == picks)
        // 30 % of 200 (binomial: 40 to 80 holds but 1 in 10,000).
        #expect((40...80).contains(picks.filter { $0 }.count), "\(picks.filter { $0 }.count)")
        let (none, noneLoop, noneOut) = self.chain([self.toxic(.latency(latency: 100, jitter: 0), toxicity: 0)])
        self.push(none, noneLoop, "x")
        #expect(noneOut.items.count == 1)
    }

    @Test func takingSeveralToxicsAwayAtOnceKeepsTheBytesInOrder() {
        // A passed the first latency and waits in the second; B waits in the first. Both go: A first.
        let (chain, loop, out) = self.chain([
            self.toxic(.latency(latency: 500, jitter: 0), name: "one"),
            self.toxic(.latency(latency: 500, jitter: 0), name: "two"),
        ])
        self.push(chain, loop, "A")
        loop.advanceTime(by: .milliseconds(600))
        self.push(chain, loop, "B")
        loop.advanceTime(by: .milliseconds(200))
        chain.setToxics([])
        #expect(out.items.map(\.text) == ["A", "B"])
        // A timeout that did not draw this connection passed X on to the latency behind it; both
        // taken away (POST /reset): X first, then the close the timeout's removal makes (Toxiproxy
        // closes every connection's stream, drawn or not).
        let (closing, closingLoop, closingOut) = self.chain([
            self.toxic(.timeout(timeout: 0), name: "t", toxicity: 0),
            self.toxic(.latency(latency: 500, jitter: 0), name: "l"),
        ])
        self.push(closing, closingLoop, "X")
        closingLoop.advanceTime(by: .milliseconds(100))
        closing.setToxics([])
        #expect(closingOut.order == ["X", "end"])
    }

    @Test func aSlicerWithNoDelayPassesEveryPieceAtOnceHoweverMany() {
        let (chain, loop, out) = self.chain([self.toxic(.slicer(averageSize: 1, sizeVariation: 0, delay: 0))])
        let text = String(repeating: "z", count: 32 * 1024)
        self.push(chain, loop, text)
        #expect(out.items.count == 32 * 1024 && out.items.allSatisfy { $0.text == "z" })
    }

    @Test func aResetUnderWayIsNotStoppedByTakingTheToxicAway() {
        let (chain, loop, out) = self.chain([self.toxic(.resetPeer(timeout: 300))])
        self.push(chain, loop, "taken")
        loop.advanceTime(by: .milliseconds(100))
        chain.setToxics([])
        loop.advanceTime(by: .milliseconds(200))
        #expect(out.ends.map(\.ending) == [.reset] && out.ends.map(\.ms) == [300])
    }

    @Test func namesAreComparedByteForByte() {
        // é precomposed and decomposed are two toxics, as in Toxiproxy.
        #expect(!ToxicChain.sameName("caf\u{E9}", "cafe\u{301}"))
        #expect(ToxicChain.sameName("caf\u{E9}", "caf\u{E9}"))
    }
}
