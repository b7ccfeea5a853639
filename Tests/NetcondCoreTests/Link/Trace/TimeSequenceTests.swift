import Testing

@testable import NetcondCore

/// The time–sequence graph's reading of a capture: which side sent the data, where each segment
/// sits in its sequence space (past a wrap too), which are retransmissions, what the receiver
/// acknowledged and offered (its window scaled by its SYN's option), and the link's drops.
@Suite struct TimeSequenceTests {
    typealias Packet = TestCapture.Packet

    func records(_ packets: [Packet]) -> [PacketCaptureFile.Record] {
        packets.enumerated().map { number, packet in
            PacketCaptureFile.Record(
                number: number + 1, offset: 0, timestamp: 1_700_000_000_000_000_000 + packet.nanoseconds, linkType: 101,
                bytes: packet.bytes, originalLength: packet.bytes.count)
        }
    }

    /// A SYN (the client's, or the server's SYN-ACK) with a window scale option (`1, 3, 3, shift`:
    /// NOP, then kind 3).
    func scaledSYN(shift: UInt8, server: Bool = false) -> [UInt8] {
        var bytes =
            server
            ? TestCapture.tcp(
                from: TestCapture.server, to: TestCapture.client, seq: 1_000_000, ack: 5_001, flags: TestCapture.synAck)
            : TestCapture.tcp(from: TestCapture.client, to: TestCapture.server, seq: 5_000, flags: TestCapture.syn)
        // IPv4 header 20 bytes: TCP's data offset 5 → 6, four bytes of options, the IP length + 4.
        bytes[20 + 12] = 0x60
        bytes.insert(contentsOf: [1, 3, 3, shift], at: 40)
        let total = UInt16(bytes.count)
        bytes[2] = UInt8(total >> 8)
        bytes[3] = UInt8(total & 0xFF)
        return bytes
    }

    /// The client acknowledging `ack` of the server's data (relative to its ISN + 1) with `window`.
    func ack(_ ack: UInt32, at ms: Double, window: UInt16, serverISN: UInt32 = 1_000_000) -> Packet {
        var bytes = TestCapture.tcp(
            from: TestCapture.client, to: TestCapture.server, seq: 5_001, ack: serverISN &+ 1 &+ ack,
            flags: TestCapture.ack)
        bytes[20 + 14] = UInt8(window >> 8)
        bytes[20 + 15] = UInt8(window & 0xFF)
        return Packet(nanoseconds: Int64(ms * 1_000_000), bytes: bytes)
    }

    @Test func aDownloadWithALossAndItsRetransmission() throws {
        // Five segments of 1,000 bytes from 30 ms; the third is lost and comes again at 100 ms.
        var packets = TestCapture.download(
            data: [(30, 1000), (31, 1000), (32, 1000), (33, 1000), (34, 1000)], skipping: [2])
        packets[0] = Packet(nanoseconds: 0, bytes: self.scaledSYN(shift: 7))
        packets[1] = Packet(nanoseconds: packets[1].nanoseconds, bytes: self.scaledSYN(shift: 2, server: true))
        packets.append(
            Packet(
                nanoseconds: 100_000_000,
                bytes: TestCapture.tcp(
                    from: TestCapture.server, to: TestCapture.client, seq: 1_002_001, ack: 5_001,
                    flags: TestCapture.ack, payload: 1000)))
        packets.append(self.ack(2000, at: 60, window: 512))
        packets.append(self.ack(5000, at: 130, window: 512))
        let dropped = [
            Packet(
                nanoseconds: 32_000_000,
                bytes: TestCapture.tcp(
                    from: TestCapture.server, to: TestCapture.client, seq: 1_002_001, ack: 5_001,
                    flags: TestCapture.ack, payload: 1000))
        ]
        let graph = TimeSequence.build(
            self.records(packets.sorted { $0.nanoseconds < $1.nanoseconds }), dropped: self.records(dropped))
        let connection = try #require(graph.connections.first)
        #expect(graph.connections.count == 1 && graph.otherPackets == 0)
        #expect(connection.sender == CapturedSegment.Endpoint(address: TestCapture.server.address, port: 443))
        #expect(connection.segments.map(\.start) == [0, 1000, 3000, 4000, 2000])
        #expect(connection.segments.map(\.retransmission) == [false, false, false, false, true])
        #expect(connection.retransmissions == 1 && connection.bytes == 5000)
        #expect(connection.segments.last?.at == 0.1)
        // The window is scaled by the client's SYN option (512 << 7); the SYN-ACK's ACK is at 0.
        #expect(connection.windowScaleKnown)
        #expect(connection.acknowledgements.map(\.ack) == [0, 2000, 5000])
        #expect(connection.acknowledgements.last?.window == Int64(5000 + (512 << 7)))
        // The link's drop is the lost segment, at its moment.
        #expect(connection.dropped == [TimeSequence.Segment(at: 0.032, start: 2000, end: 3000, retransmission: false)])
        #expect(connection.flags.map(\.kind) == ["SYN", "SYN"])

        // Only the client offered the option: no scaling either way (RFC 7323), and the page says so.
        packets[1] = Packet(
            nanoseconds: packets[1].nanoseconds,
            bytes: TestCapture.tcp(
                from: TestCapture.server, to: TestCapture.client, seq: 1_000_000, ack: 5_001, flags: TestCapture.synAck)
        )
        let unscaled = try #require(
            TimeSequence.build(self.records(packets.sorted { $0.nanoseconds < $1.nanoseconds })).connections.first)
        #expect(unscaled.acknowledgements.last?.window == Int64(5000 + 512))
    }

    @Test func stampsAtTheEndsOfTime64DoNotOverflow() throws {
        let packets = TestCapture.download(syn: nil, data: [(30, 500), (31, 500)])
        let records = self.records(packets).enumerated().map { index, record in
            var record = record
            record.timestamp = index == 0 ? Int64.min + 1 : Int64.max - 1
            return record
        }
        let connection = try #require(TimeSequence.build(records).connections.first)
        #expect(connection.duration > 1e10 && connection.segments.count == 2)
    }

    @Test func sequenceNumbersAreUnwrappedPastFourGigabytes() throws {
        // The server's ISN just below 2³²: its bytes cross the wrap and keep counting up.
        let packets = TestCapture.download(data: (0..<6).map { (30 + Double($0), 1000) }, serverISN: UInt32.max - 2_500)
        let connection = try #require(TimeSequence.build(self.records(packets)).connections.first)
        #expect(connection.segments.map(\.start) == [0, 1000, 2000, 3000, 4000, 5000])
        #expect(!connection.windowScaleKnown || connection.acknowledgements.allSatisfy { $0.window != nil })
        #expect(connection.retransmissions == 0)
    }

    @Test func aCaptureWithoutTheHandshakeStartsAtItsFirstSegment() throws {
        let packets = TestCapture.download(syn: nil, data: [(30, 500), (31, 500), (32, 500)])
        let connection = try #require(TimeSequence.build(self.records(packets)).connections.first)
        #expect(connection.segments.map(\.start) == [0, 500, 1000])
        #expect(!connection.windowScaleKnown)
        #expect(connection.flags.isEmpty)
    }

    @Test func theWindowScaleOptionIsFoundAmongOthers() {
        // MSS (kind 2, 4 bytes), NOP, window scale 9, then end of options.
        let options: [UInt8] = [2, 4, 5, 0xB4, 1, 3, 3, 9, 0]
        #expect(CapturedSegment.windowScale(options, from: 0, to: options.count) == 9)
        #expect(CapturedSegment.windowScale([2, 4, 5, 0xB4], from: 0, to: 4) == nil)
        #expect(CapturedSegment.windowScale([3, 3], from: 0, to: 2) == nil, "cut off by the capture")
        #expect(CapturedSegment.windowScale([5, 0, 3, 3, 9], from: 0, to: 5) == nil, "a bad length ends the walk")
        #expect(CapturedSegment.windowScale([3, 3, 20], from: 0, to: 3) == 14, "at most 14, as RFC 7323 says")
    }
}
