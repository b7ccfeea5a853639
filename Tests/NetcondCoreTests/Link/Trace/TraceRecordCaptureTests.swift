import Foundation
import Testing

@testable import NetcondCore

/// Reading captures for `netcond trace record`: classic pcap and pcapng in both byte orders, every
/// link type read, IPv4 and IPv6, and the errors a bad file gets.
@Suite struct TraceRecordCaptureTests {
    /// Handshake at 0 / 20 / 20.1 ms, then four 1,500-byte packets at 30, 31.2, 32.9 and 35 ms.
    func download(client: TestCapture.Host = TestCapture.client, server: TestCapture.Host = TestCapture.server)
        -> [TestCapture.Packet]
    {
        TestCapture.download(
            data: [(30, 1460), (31.2, 1460), (32.9, 1460), (35, 1460)], client: client, server: server)
    }

    func expectTheDownload(_ recording: TraceRecording, exactDelay: Bool = true) {
        #expect(TestCapture.times(recording) == [0, 1, 2, 5])
        #expect(recording.client == CapturedSegment.Endpoint(address: TestCapture.client.address, port: 51_000))
        #expect(recording.server == CapturedSegment.Endpoint(address: TestCapture.server.address, port: 443))
        #expect(recording.packets == 4)
        #expect(recording.ipBytes == 6_000)
        if exactDelay {
            #expect(recording.delay.latency(.down) == Span.microseconds(10_050))
            #expect(recording.delay.latency(.up) == Span.microseconds(10_050))
        }
    }

    @Test(arguments: [(false, false), (false, true), (true, false), (true, true)])
    func classicPcapInMicrosecondsAndNanosecondsEitherByteOrder(nanoseconds: Bool, bigEndian: Bool) throws {
        let file = TestCapture.classic(self.download(), nanoseconds: nanoseconds, bigEndian: bigEndian)
        self.expectTheDownload(try TestCapture.record(file))
    }

    @Test(arguments: [false, true])
    func pcapngInEitherByteOrderAndItsTimestampResolutions(bigEndian: Bool) throws {
        self.expectTheDownload(try TestCapture.record(TestCapture.pcapng(self.download(), bigEndian: bigEndian)))
        self.expectTheDownload(
            try TestCapture.record(TestCapture.pcapng(self.download(), resolution: 9, bigEndian: bigEndian)))
        // 2^-20 s ticks: within a microsecond of the moments.
        let binary = try TestCapture.record(
            TestCapture.pcapng(self.download(), resolution: 0x80 | 20, bigEndian: bigEndian))
        self.expectTheDownload(binary, exactDelay: false)
        let oneWay = try #require(binary.delay.latency(.down))
        #expect(abs(oneWay.nanoseconds - 10_050_000) <= 1_000)
    }

    @Test(arguments: [UInt32(101), 12, 14, 1, 113, 276, 0, 108])
    func everyLinkTypeWithIPv4AndIPv6(linkType: UInt32) throws {
        self.expectTheDownload(try TestCapture.record(TestCapture.classic(self.download(), linkType: linkType)))
        // IPv6: 1,520-byte packets cross the same 1,500-byte boundaries here.
        let v6 = try TestCapture.record(
            TestCapture.classic(
                self.download(client: TestCapture.client6, server: TestCapture.server6), linkType: linkType))
        #expect(TestCapture.times(v6) == [0, 1, 2, 5])
        #expect(v6.client.description == "[2001:db8::2]:51000")
        #expect(v6.server.description == "[2001:db8::7]:443")
    }

    @Test func ethernetWithAVLANTagAndLoopbackInEitherByteOrder() throws {
        let plain = self.download()
        // classic() frames with the plain header; build these frames here instead.
        func frame(_ packets: [TestCapture.Packet], _ link: ([UInt8]) -> [UInt8]) -> [TestCapture.Packet] {
            packets.map { TestCapture.Packet(nanoseconds: $0.nanoseconds, bytes: link($0.bytes)) }
        }
        let vlan = frame(plain) { TestCapture.framed($0, linkType: 1, vlan: true) }
        let bigFamily = frame(plain) { TestCapture.framed($0, linkType: 0, littleEndianFamily: false) }
        // Link type 147 (a user type) frames nothing in the writer: the bytes go in as given.
        for (packets, linkType) in [(vlan, UInt32(1)), (bigFamily, 0), (bigFamily, 108)] {
            var file = TestCapture.classic(packets, linkType: 147)
            file[20..<24] = TestCapture.le32(linkType)[...]
            self.expectTheDownload(try TestCapture.record(file))
        }
    }

    @Test func aCaptureCutAt96BytesStillCountsWholePackets() throws {
        let recording = try TestCapture.record(TestCapture.classic(self.download(), linkType: 1, snap: 96))
        self.expectTheDownload(recording)
        #expect(recording.payloadBytes == 4 * 1_460)
    }

    @Test func ipv6ExtensionHeadersAreWalked() throws {
        var packets = self.download(client: TestCapture.client6, server: TestCapture.server6)
        packets[4].bytes = TestCapture.tcp(
            from: TestCapture.server6, to: TestCapture.client6, seq: 1_001_461, ack: 5_001, flags: TestCapture.ack,
            payload: 1_460,
            extensionHeader: true)
        let recording = try TestCapture.record(TestCapture.classic(packets))
        #expect(recording.packets == 4)
        #expect(recording.loss.holes == 0)
        #expect(recording.ipBytes == 3 * 1_520 + 1_528)
    }

    @Test func ipv4FragmentsOtherThanTheFirstAreSkipped() throws {
        var packets = self.download()
        var fragment = packets[5].bytes
        fragment[6] = 0x00
        fragment[7] = 0xB9  // offset 185 × 8 bytes: a later fragment, whose bytes are not TCP's header
        packets.insert(TestCapture.Packet(nanoseconds: 31_500_000, bytes: fragment), at: 5)
        self.expectTheDownload(try TestCapture.record(TestCapture.classic(packets)))
    }

    @Test func onlyTheFirstBytesOfALargePacketAreKept() throws {
        var file = TestCapture.classic(self.download())
        // A 100 KB packet of another protocol (UDP) at the end: read past, not kept whole.
        let udp: [UInt8] = [0x45, 0, 0xFF, 0xFF, 0, 1, 0, 0, 64, 17, 0, 0] + [10, 0, 0, 9, 10, 0, 0, 8]
        let big = udp + [UInt8](repeating: 7, count: 100_000)
        file +=
            TestCapture.le32(1_700_000_001) + TestCapture.le32(0) + TestCapture.le32(UInt32(big.count))
            + TestCapture.le32(UInt32(big.count))
        file += big
        var capture = try PacketCaptureFile(bytes: file, source: "t.pcap")
        var last: PacketCaptureFile.Record?
        while let record = try capture.next() { last = record }
        #expect(last?.number == 8)
        #expect(last?.bytes.count == PacketCaptureFile.headerBytes)
        #expect(last?.originalLength == big.count)
    }

    // MARK: - Errors

    @Test func anEmptyOrTextFileIsNotACapture() {
        #expect(TestCapture.recordError([]) == "t.pcap: not a pcap or pcapng file (the file is empty)")
        #expect(TestCapture.recordError([0xd4, 0xc3]) == "t.pcap: not a pcap or pcapng file (the file is 2 bytes)")
        let text = TestCapture.recordError(Array("hello, world\n".utf8))
        #expect(text?.hasPrefix("t.pcap: not a pcap or pcapng file (first bytes 68 65 6c 6c") == true)
    }

    @Test func aTruncatedRecordSaysWhichPacketAndWhere() {
        let file = TestCapture.classic(self.download())
        // Records: 24-byte header, then 16 + 40 (handshake) and 16 + 1500 (data) bytes each.
        let seventh = 24 + 3 * (16 + 40) + 3 * (16 + 1_500)
        let truncated =
            "t.pcap: packet 7 at byte \(seventh) is truncated (the file ends inside it; if the capture was stopped "
            + "while writing, `head -c \(seventh) t.pcap > whole.pcap` keeps the packets before it)"
        #expect(TestCapture.recordError(Array(file.dropLast(10))) == truncated)
        #expect(TestCapture.recordError(Array(file.prefix(seventh + 5))) == truncated)
        #expect(TestCapture.recordError(Array(file.prefix(20)))?.contains("header is truncated") == true)
        let pcapng = TestCapture.pcapng(self.download())
        #expect(TestCapture.recordError(Array(pcapng.dropLast(3)))?.contains("is truncated") == true)
    }

    @Test func anAbsurdRecordLengthIsRefused() {
        var file = TestCapture.classic(self.download())
        file[24 + 8..<24 + 12] = TestCapture.le32(4_000_000_000)[...]
        #expect(TestCapture.recordError(file)?.contains("packet 1 at byte 24 claims 4000000000 captured bytes") == true)
    }

    @Test func anUnsupportedLinkTypeNamesTheAllowedOnes() {
        let error = TestCapture.recordError(TestCapture.classic(self.download(), linkType: 105))
        #expect(
            error?.hasPrefix(
                "t.pcap: packet 1 at byte 24 has link type 105, which is not read; allowed: RAW (101, 12, 14)") == true)
    }

    @Test func aCaptureWithoutTCPDataSaysSo() {
        let udp: [UInt8] =
            [0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 9, 10, 0, 0, 8] + [UInt8](repeating: 0, count: 8)
        #expect(
            TestCapture.recordError(TestCapture.classic([.init(nanoseconds: 0, bytes: udp)]))
                == "t.pcap: no TCP packets in the capture (1 packets read)")
        let handshakeOnly = TestCapture.download(data: [])
        #expect(
            TestCapture.recordError(TestCapture.classic(handshakeOnly))?.contains(
                "no data packets in the chosen direction") == true)
        // One packet: no period.
        let one = TestCapture.download(data: [(30, 1460)])
        #expect(
            TestCapture.recordError(TestCapture.classic(one))?.contains("all arrived within one millisecond") == true)
        // Timestamps in whole seconds: 9,000 packets at one moment would not read back as a trace.
        let coarse = TestCapture.download(
            data: [(ms: Double, payload: Int)](repeating: (1_000, 1_460), count: 9_000) + [(2_000, 1_460)])
        #expect(
            TestCapture.recordError(TestCapture.classic(coarse))?.contains("timestamps coarser than a millisecond")
                == true)
    }
}
