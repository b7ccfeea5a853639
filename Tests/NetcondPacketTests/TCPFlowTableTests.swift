import NetcondCore
import Testing

@testable import NetcondPacket

/// Packets built by hand: the flow table follows what the link delivered, so that a cut's resets
/// carry the sequence number each end accepts (RFC 5961: exactly the next one it expects).
@Suite struct TCPFlowTableTests {
    static let client: [UInt8] = [127, 0, 0, 1]
    static let server: [UInt8] = [127, 0, 0, 2]

    /// An IPv4 TCP packet's head: `payload` bytes follow the 20-byte TCP header.
    static func packet(
        from source: [UInt8], _ sourcePort: UInt16, to destination: [UInt8], _ destinationPort: UInt16,
        seq: UInt32, ack: UInt32 = 0, flags: UInt8, payload: Int = 0
    ) -> TCPHeader {
        var bytes = [UInt8](repeating: 0, count: 40)
        bytes[0] = 0x45
        bytes[9] = 6
        bytes.replaceSubrange(12..<16, with: source)
        bytes.replaceSubrange(16..<20, with: destination)
        bytes[20] = UInt8(sourcePort >> 8)
        bytes[21] = UInt8(sourcePort & 0xff)
        bytes[22] = UInt8(destinationPort >> 8)
        bytes[23] = UInt8(destinationPort & 0xff)
        for (offset, value) in [(24, seq), (28, ack)] {
            for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32(index))) }
        }
        bytes[32] = 5 << 4
        bytes[33] = flags
        return bytes.withUnsafeBufferPointer { TCPHeader($0.baseAddress!, copied: 40, length: 40 + payload)! }
    }

    static func up(seq: UInt32, ack: UInt32 = 0, flags: UInt8, payload: Int = 0) -> TCPHeader {
        Self.packet(from: Self.client, 40000, to: Self.server, 80, seq: seq, ack: ack, flags: flags, payload: payload)
    }

    static func down(seq: UInt32, ack: UInt32 = 0, flags: UInt8, payload: Int = 0) -> TCPHeader {
        Self.packet(from: Self.server, 80, to: Self.client, 40000, seq: seq, ack: ack, flags: flags, payload: payload)
    }

    static let syn = TCPHeader.syn
    static let ack = TCPHeader.ackFlag

    /// A handshake (client ISN 1000, server ISN 5000), delivered both ways.
    static func established() -> (TCPFlowTable, FlowKey) {
        var table = TCPFlowTable()
        let syn = Self.up(seq: 1000, flags: Self.syn)
        let synAck = Self.down(seq: 5000, ack: 1001, flags: Self.syn | Self.ack)
        let ack = Self.up(seq: 1001, ack: 5001, flags: Self.ack)
        for (header, up) in [(syn, true), (synAck, false), (ack, true)] {
            table.offered(header, up: up, at: .zero)
            table.delivered(header, up: up)
        }
        return (table, FlowKey(syn, up: true))
    }

    @Test func headersAreReadWithTheirSequenceSpace() {
        let data = Self.up(seq: 7, ack: 9, flags: Self.ack | TCPHeader.fin, payload: 100)
        #expect(data.seq == 7 && data.ack == 9 && data.sourcePort == 40000 && data.destinationPort == 80)
        #expect(data.span == 101)  // 100 bytes and the FIN
        #expect(Self.up(seq: 1, flags: Self.syn).span == 1)
        #expect(Self.up(seq: 1, flags: Self.syn).isSYN)
        #expect(!Self.down(seq: 1, flags: Self.syn | Self.ack).isSYN)
    }

    @Test func whatIsNotTCPOrTooShortIsNotRead() {
        var udp = [UInt8](repeating: 0, count: 40)
        udp[0] = 0x45
        udp[9] = 17
        #expect(udp.withUnsafeBufferPointer { TCPHeader($0.baseAddress!, copied: 40, length: 40) } == nil)
        var short = [UInt8](repeating: 0, count: 30)
        short[0] = 0x45
        short[9] = 6
        #expect(short.withUnsafeBufferPointer { TCPHeader($0.baseAddress!, copied: 30, length: 30) } == nil)
        let garbage: [UInt8] = [0xff, 1, 2]
        #expect(garbage.withUnsafeBufferPointer { TCPHeader($0.baseAddress!, copied: 3, length: 3) } == nil)
    }

    @Test func aResetCarriesTheNextSequenceNumberDeliveredToEachEnd() {
        var (table, key) = Self.established()
        let data = Self.down(seq: 5001, ack: 1001, flags: Self.ack, payload: 1000)
        table.offered(data, up: false, at: .zero)
        // Not yet delivered: the client still expects 5001.
        #expect(table.resetSequence(key, towardCage: true) == 5001)
        table.delivered(data, up: false)
        #expect(table.resetSequence(key, towardCage: true) == 6001)
        #expect(table.resetSequence(key, towardCage: false) == 1001)
    }

    @Test func aHoleStopsTheDeliveredEdgeButTheReceiversAckMovesIt() {
        var (table, key) = Self.established()
        let first = Self.down(seq: 5001, flags: Self.ack, payload: 1000)
        let second = Self.down(seq: 6001, flags: Self.ack, payload: 1000)
        table.offered(first, up: false, at: .zero)
        table.offered(second, up: false, at: .zero)
        table.delivered(second, up: false)  // the first was lost on the link
        #expect(table.resetSequence(key, towardCage: true) == 5001)
        // The retransmission fills the hole; the client acknowledges both.
        table.delivered(first, up: false)
        let ack = Self.up(seq: 1001, ack: 7001, flags: Self.ack)
        table.offered(ack, up: true, at: .zero)
        #expect(table.resetSequence(key, towardCage: true) == 7001)
    }

    /// A scenario's evidence counts the bytes of a response that reached the client: a loss
    /// repaired after later segments arrived must not stop the count at the hole (it read "cut"
    /// for a response the client received whole).
    @Test func bytesDeliveredPastARepairedHoleAreCountedFromTheReceiversAck() {
        var (table, _) = Self.established()
        let segments = (0..<4).map { Self.down(seq: 5001 + UInt32($0) * 1000, flags: Self.ack, payload: 1000) }
        for segment in segments { table.offered(segment, up: false, at: .zero) }
        for segment in segments[1...] { table.delivered(segment, up: false) }  // the first was lost
        #expect(table.records[0].farBytesDelivered == 0)
        table.delivered(segments[0], up: false)  // its retransmission
        #expect(table.records[0].farBytesDelivered == 1000, "the link's edge stops past the repair")
        table.offered(Self.up(seq: 1001, ack: 9001, flags: Self.ack), up: true, at: .zero)
        #expect(
            table.records[0].farBytesDelivered == 4000, "the client's acknowledgement carries it past what it holds")
        // The FIN takes no byte.
        let fin = Self.down(seq: 9001, flags: Self.ack | TCPHeader.fin)
        table.offered(fin, up: false, at: .zero)
        table.delivered(fin, up: false)
        table.offered(Self.up(seq: 1001, ack: 9002, flags: Self.ack), up: true, at: .zero)
        #expect(table.records[0].farBytesDelivered == 4000)
    }

    @Test func sequenceNumbersWrap() {
        var table = TCPFlowTable()
        let syn = Self.up(seq: UInt32.max - 10, flags: Self.syn)
        table.offered(syn, up: true, at: .zero)
        table.delivered(syn, up: true)
        let data = Self.up(seq: UInt32.max - 9, flags: Self.ack, payload: 100)
        table.offered(data, up: true, at: .zero)
        table.delivered(data, up: true)
        #expect(table.resetSequence(FlowKey(syn, up: true), towardCage: false) == 90)
    }

    @Test func aResetEndsAFlowAndACutOneIsForgottenAfterItsTwoResets() {
        var (table, key) = Self.established()
        #expect(table.keys == [key])
        table.markCut(key)
        #expect(table.keys.isEmpty)  // being cut: not cut twice
        table.resetSent(key, towardCage: true)
        #expect(table.resetSequence(key, towardCage: false) == 1001)
        // What reaches the client after its reset meets a closed socket: it counts for nothing.
        let late = Self.down(seq: 5001, ack: 1001, flags: Self.ack, payload: 1000)
        table.delivered(late, up: false)
        table.resetSent(key, towardCage: false)
        #expect(table.resetSequence(key, towardCage: false) == nil)
        #expect(table.records.last?.farBytesDelivered == 0 && table.records.last?.cutByLink == true)

        var (other, otherKey) = Self.established()
        other.offered(Self.down(seq: 5001, flags: TCPHeader.rst), up: false, at: .zero)
        #expect(other.resetSequence(otherKey, towardCage: true) == nil)
    }

    @Test func packetsOfAConnectionNeverSeenStartingAreNotFollowed() {
        var table = TCPFlowTable()
        table.offered(Self.up(seq: 1, ack: 1, flags: Self.ack), up: true, at: .zero)
        #expect(table.keys.isEmpty)
    }
}
