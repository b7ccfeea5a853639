import NIOCore
import Testing

@testable import NetcondOrigin

@Suite("DeterministicBytes")
struct DeterministicBytesTests {
    @Test("the stream is pinned: a change to the generator breaks every stored expectation")
    func pinnedPrefix() {
        let source = DeterministicBytes(seed: 0)
        #expect(source.word(at: 0) == 0xE220_A839_7B1D_CDAF)
        #expect(source.bytes(offset: 0, count: 8) == [0xAF, 0xCD, 0x1D, 0x7B, 0x39, 0xA8, 0x20, 0xE2])
    }

    @Test("byte(at:) agrees with fill at every alignment and length")
    func byteAtMatchesFill() {
        let source = DeterministicBytes(seed: 42)
        let reference = (0..<200).map { source.byte(at: Int64($0)) }
        for offset in 0..<20 {
            for count in [0, 1, 3, 7, 8, 9, 15, 16, 17, 100] {
                let slice = source.bytes(offset: Int64(offset), count: count)
                #expect(slice == Array(reference[offset..<(offset + count)]), "offset \(offset) count \(count)")
            }
        }
    }

    @Test("fill(into:) appends the same bytes to a ByteBuffer, at large offsets too")
    func fillIntoByteBuffer() {
        let source = DeterministicBytes(seed: 7)
        let offset: Int64 = 4 << 30 - 13
        var buffer = ByteBuffer(string: "xy")
        source.fill(into: &buffer, offset: offset, count: 1000)
        #expect(buffer.readableBytes == 1002)
        #expect(buffer.getBytes(at: 0, length: 2) == Array("xy".utf8))
        #expect(buffer.getBytes(at: 2, length: 1000) == source.bytes(offset: offset, count: 1000))
        #expect(source.byte(at: offset + 999) == buffer.getBytes(at: 1001, length: 1)?.first)
    }

    @Test("different seeds give different streams; the same seed the same one")
    func seedsDiffer() {
        let a = DeterministicBytes(seed: 1).bytes(offset: 0, count: 4096)
        let b = DeterministicBytes(seed: 2).bytes(offset: 0, count: 4096)
        #expect(a != b)
        #expect(a == DeterministicBytes(seed: 1).bytes(offset: 0, count: 4096))
        // Not a constant or short cycle: most byte values appear.
        #expect(Set(a).count > 200)
    }

    @Test("firstMismatch finds the first differing byte across chunk boundaries")
    func firstMismatch() {
        let source = DeterministicBytes(seed: 3)
        var data = source.bytes(offset: 100, count: 200_000)
        #expect(source.firstMismatch(in: data, offset: 100) == nil)
        data[150_000] ^= 0x01
        #expect(source.firstMismatch(in: data, offset: 100) == 150_100)
        #expect(source.firstMismatch(in: data, offset: 101) == 101)
    }
}
