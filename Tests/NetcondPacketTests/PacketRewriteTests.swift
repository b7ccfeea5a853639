import CNetcondPacket
import Testing

@testable import NetcondPacket

/// The engine's rewrites of whole packets: a duplicate's transport checksum made whole (loopback
/// leaves it partial), and a corruption that a receiver's checksum check catches.
@Suite struct PacketRewriteTests {
    /// An IPv4 packet with `protocol` (6 or 17) and `payload` bytes after its transport header; its
    /// transport checksum is garbage.
    static func packet(protocol proto: UInt8, payload: Int) -> [UInt8] {
        let transport = proto == 6 ? 20 : 8
        var bytes = [UInt8](repeating: 0, count: 20 + transport + payload)
        bytes[0] = 0x45
        bytes[2] = UInt8(bytes.count >> 8)
        bytes[3] = UInt8(bytes.count & 0xff)
        bytes[8] = 64
        bytes[9] = proto
        bytes.replaceSubrange(12..<20, with: [127, 0, 0, 1, 127, 0, 0, 2])
        bytes[20] = 0x9c
        bytes[21] = 0x40
        bytes[23] = 80
        if proto == 6 {
            bytes[32] = 5 << 4
            bytes[33] = 0x18
            bytes[36] = 0xde
            bytes[37] = 0xad
        } else {
            bytes[24] = UInt8((8 + payload) >> 8)
            bytes[25] = UInt8((8 + payload) & 0xff)
            bytes[26] = 0xde
            bytes[27] = 0xad
        }
        for index in 0..<payload { bytes[20 + transport + index] = UInt8(truncatingIfNeeded: index * 7 + 3) }
        return bytes
    }

    /// The one's-complement sum over the pseudo-header and the transport part: 0xffff when the
    /// checksum is right.
    static func verifies(_ bytes: [UInt8]) -> Bool {
        var sum: UInt32 = 0
        func add(_ data: ArraySlice<UInt8>) {
            var index = data.startIndex
            while index + 1 < data.endIndex {
                sum += UInt32(data[index]) << 8 | UInt32(data[index + 1])
                index += 2
            }
            if index < data.endIndex { sum += UInt32(data[index]) << 8 }
        }
        add(bytes[12..<20])
        sum += UInt32(bytes[9]) + UInt32(bytes.count - 20)
        add(bytes[20...])
        while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
        return sum == 0xffff
    }

    static func fix(_ bytes: inout [UInt8]) -> Int32 {
        let length = UInt32(bytes.count)
        return bytes.withUnsafeMutableBufferPointer { ncq_fix_checksum($0.baseAddress!, length) }
    }

    @Test(arguments: [(UInt8(6), 1000), (UInt8(6), 1), (UInt8(17), 37), (UInt8(17), 0)])
    func aChecksumIsMadeWhole(proto: UInt8, payload: Int) {
        var bytes = Self.packet(protocol: proto, payload: payload)
        #expect(!Self.verifies(bytes))
        #expect(Self.fix(&bytes) == 20)
        #expect(Self.verifies(bytes))
    }

    @Test func aCorruptedPacketFailsItsChecksumAndKeepsItsIPHeader() {
        for offset in [0, 5, 19, 20, 700, 1047, 99_999] {
            let original = Self.packet(protocol: 6, payload: 1000)
            var bytes = original
            PacketEngine.corrupt(&bytes, offset: offset)
            #expect(bytes.prefix(20) == original.prefix(20), "offset \(offset)")
            #expect(zip(bytes, original).filter { $0 != $1 }.count >= 1)
            #expect(!Self.verifies(bytes), "offset \(offset): the receiver would accept it")
        }
    }

    @Test func whatIsNotTCPOrUDPIsLeftAlone() {
        var icmp = Self.packet(protocol: 17, payload: 8)
        icmp[9] = 1
        let before = icmp
        #expect(Self.fix(&icmp) == -1 && icmp == before)
        var fragment = Self.packet(protocol: 17, payload: 8)
        fragment[6] = 0x20  // more fragments
        #expect(Self.fix(&fragment) == -1)
    }
}
