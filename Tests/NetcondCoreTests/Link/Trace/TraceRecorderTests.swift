import Foundation
import Testing

@testable import NetcondCore

/// `netcond trace record`'s analysis, exact on made-up captures: opportunities from arrivals,
/// delays from the handshake, loss from sequence holes, the window, idle stretches, and a trace
/// that records back to itself.
@Suite struct TraceRecorderTests {
    func record(_ packets: [TestCapture.Packet], _ options: TraceRecorder.Options = .init()) throws -> TraceRecording {
        try TestCapture.record(TestCapture.classic(packets, nanoseconds: true), options)
    }

    /// `count` packets of 1,460 payload bytes (1,500 on the wire), one every `every` ms from `first` ms.
    func steady(from first: Double, count: Int, every: Double = 1) -> [(ms: Double, payload: Int)] {
        (0..<count).map { (first + Double($0) * every, 1_460) }
    }

    @Test func opportunitiesAreTheMillisecondsWhereTheBytesCrossEach1500() throws {
        // 1,500; 1,500; a 9,000-byte merged packet (GRO); then three of 700 (the third crosses 9 × 1,500).
        let data: [(ms: Double, payload: Int)] = [
            (30, 1_460), (31.3, 1_460), (33, 8_960), (37, 660), (38, 660), (39.9, 660),
        ]
        let recording = try self.record(TestCapture.download(data: data))
        #expect(TestCapture.times(recording) == [0, 1, 3, 3, 3, 3, 3, 3, 9])
        #expect(recording.traceText == "0\n1\n3\n3\n3\n3\n3\n3\n9\n")
        #expect(recording.packets == 6)
        #expect(recording.ipBytes == 3_000 + 9_000 + 2_100)
    }

    @Test func aRetransmittedSegmentStillCrossedTheLink() throws {
        var packets = TestCapture.download(data: self.steady(from: 30, count: 4))
        // The second segment again, at 40 ms.
        packets.append(TestCapture.Packet(nanoseconds: 40_000_000, bytes: packets[4].bytes))
        let recording = try self.record(packets)
        #expect(TestCapture.times(recording) == [0, 1, 2, 3, 10])
        #expect(recording.loss.retransmissions == 1)
        #expect(recording.loss.holes == 0)
        #expect(recording.loss.probability == .zero)
    }

    // MARK: - Delay

    @Test func capturedAtTheClientTheRoundTripIsSplitInHalves() throws {
        let packets = TestCapture.download(
            syn: 0, synAck: 40_000_000, ack: 40_050_000, data: self.steady(from: 50, count: 5))
        let recording = try self.record(packets)
        let handshake = TraceRecording.Handshake(syn: .zero, synAck: .milliseconds(40), ack: .microseconds(40_050))
        #expect(recording.delay == .halfRoundTrip(handshake, oneWay: .microseconds(20_025)))
        let yaml = recording.profileYAML(name: "x", traceFile: "x.trace", captureName: "t.pcap")
        #expect(yaml.contains("down:\n  trace: \"x.trace\"\n  latency: 20.025ms\nup:\n  latency: 20.025ms\n"))
    }

    @Test func capturedAtTheServerTheRoundTripIsSplitInHalvesToo() throws {
        let packets = TestCapture.download(
            syn: 0, synAck: 50_000, ack: 40_050_000, data: self.steady(from: 50, count: 5))
        let recording = try self.record(packets)
        #expect(recording.delay.latency(.down) == .microseconds(20_025))
        #expect(recording.delay.latency(.up) == .microseconds(20_025))
        #expect(recording.delayLines[1].contains("captured near the server"))
    }

    @Test func capturedMidLinkEachLegIsADirectionsDelay() throws {
        // As netcond's own --pcap stamps them: the SYN left the up link, the SYN-ACK the down link
        // 30 ms later, the ACK the up link 20 ms after that.
        let packets = TestCapture.download(
            syn: 0, synAck: 30_000_000, ack: 50_000_000, data: self.steady(from: 60, count: 5))
        let recording = try self.record(packets)
        let handshake = TraceRecording.Handshake(syn: .zero, synAck: .milliseconds(30), ack: .milliseconds(50))
        #expect(recording.delay == .midLink(handshake, down: .milliseconds(30), up: .milliseconds(20)))
        let yaml = recording.profileYAML(name: "x", traceFile: "x.trace", captureName: "t.pcap")
        #expect(yaml.contains("down:\n  trace: \"x.trace\"\n  latency: 30ms\nup:\n  latency: 20ms\n"))
        // Recording the up direction puts the trace on up; the delays stay each direction's own.
        let up =
            TestCapture.download(syn: 0, synAck: 30_000_000, ack: 50_000_000, data: [])
            + (0..<5).map { index in
                TestCapture.Packet(
                    nanoseconds: 60_000_000 + Int64(index) * 1_000_000,
                    bytes: TestCapture.tcp(
                        from: TestCapture.client, to: TestCapture.server, seq: 5_001 + UInt32(index) * 1_460,
                        ack: 1_000_001,
                        flags: TestCapture.ack, payload: 1_460))
            }
        let upward = try self.record(up, .init(direction: .up))
        #expect(TestCapture.times(upward) == [0, 1, 2, 3, 4])
        let upYAML = upward.profileYAML(name: "x", traceFile: "x.trace", captureName: "t.pcap")
        #expect(upYAML.contains("down:\n  latency: 30ms\nup:\n  trace: \"x.trace\"\n  latency: 20ms\n"))
        #expect(TestCapture.recordError(TestCapture.classic(up))?.contains("try --direction up") == true)
    }

    @Test func withoutAHandshakeTheDelayIsUnknownAndLeftOut() throws {
        var packets = TestCapture.download(syn: nil, data: self.steady(from: 30, count: 4))
        // The client acknowledges the first two segments 0.4 ms after the second arrives.
        packets.append(
            TestCapture.Packet(
                nanoseconds: 31_400_000,
                bytes: TestCapture.tcp(
                    from: TestCapture.client, to: TestCapture.server, seq: 5_001, ack: 1_002_921, flags: TestCapture.ack
                )))
        let recording = try self.record(packets.sorted { $0.nanoseconds < $1.nanoseconds })
        #expect(recording.delay == .unknown(smallestDataToAck: .microseconds(400)))
        #expect(!recording.clientBySYN)
        #expect(recording.client.port == 51_000)
        let yaml = recording.profileYAML(name: "x", traceFile: "x.trace", captureName: "t.pcap")
        #expect(!yaml.contains("latency:"))
        #expect(!yaml.contains("up:"))
        #expect(yaml.contains("# No handshake in the capture"))
        #expect(yaml.contains("round trip unknown"))
        let profile = try ProfileDecoder().decode(
            yaml: yaml.replacingOccurrences(of: "  trace: \"x.trace\"\n", with: ""), file: "x.yaml")
        #expect(profile.down.latency == .zero)
    }

    // MARK: - Loss

    @Test func aHoleInTheSequenceIsLossAndItsRepairARetransmission() throws {
        var packets = TestCapture.download(data: self.steady(from: 30, count: 20), skipping: [5])
        let repair = TestCapture.tcp(
            from: TestCapture.server, to: TestCapture.client, seq: 1_000_001 + 5 * 1_460, ack: 5_001,
            flags: TestCapture.ack, payload: 1_460)
        packets.append(TestCapture.Packet(nanoseconds: 60_000_000, bytes: repair))
        let recording = try self.record(packets)
        #expect(
            recording.loss
                == TraceRecording.Loss(
                    holes: 1, missingPackets: 1, retransmissions: 1, deliveredPackets: 20, typicalPayload: 1_460))
        #expect(recording.loss.probability == Probability(1.0 / 21))
        let yaml = recording.profileYAML(name: "x", traceFile: "x.trace", captureName: "t.pcap")
        #expect(yaml.contains("  loss: 4.762%\nup:"))
        // Three segments missing in one hole.
        let wide = try self.record(TestCapture.download(data: self.steady(from: 30, count: 20), skipping: [5, 6, 7]))
        #expect(wide.loss.holes == 1)
        #expect(wide.loss.missingPackets == 3)
    }

    @Test func sequenceNumbersWrapAround() throws {
        let isn = UInt32.max - 3_000
        let clean = try self.record(TestCapture.download(data: self.steady(from: 30, count: 10), serverISN: isn))
        #expect(
            clean.loss
                == TraceRecording.Loss(
                    holes: 0, missingPackets: 0, retransmissions: 0, deliveredPackets: 10, typicalPayload: 1_460))
        #expect(TestCapture.times(clean) == Array(0...9))
        // A hole just across the wrap (the third segment starts at 2,920 − 3,000 + … past 0).
        let holed = try self.record(
            TestCapture.download(data: self.steady(from: 30, count: 10), serverISN: isn, skipping: [2]))
        #expect(holed.loss.holes == 1)
        #expect(holed.loss.missingPackets == 1)
        #expect(holed.loss.retransmissions == 0)
    }

    // MARK: - Window and idle stretches

    @Test func aWindowCutsTheCaptureAndTheTraceStartsAtItsStart() throws {
        // One packet a millisecond from 30 ms to 3,029 ms.
        let packets = TestCapture.download(data: self.steady(from: 30, count: 3_000))
        let recording = try self.record(packets, .init(from: .seconds(1), to: .seconds(2)))
        #expect(TestCapture.times(recording) == Array(0...1_000))
        #expect(recording.windowStart == .seconds(1))
        #expect(recording.windowEnd == .seconds(2))
        // 1,000 packets of 1,500 bytes in the one whole second: 12 Mbit/s.
        #expect(recording.perSecondRates == .init(wholeSeconds: 1, busy: [Bandwidth(bitsPerSecond: 12_000_000)]))
        #expect(recording.perSecondRates.percentile(50) == Bandwidth(bitsPerSecond: 12_000_000))
        let idle = TraceRecording.PerSecondRates(wholeSeconds: 10, busy: [.kbit(8), .kbit(16)])
        #expect(idle.percentile(10) == Bandwidth(bitsPerSecond: 0) && idle.percentile(90) == .kbit(8))
        #expect(recording.idle.stretches.isEmpty)
        #expect(recording.trace.meanRate == Bandwidth(bitsPerSecond: 12_012_000))

        let options: [(TraceRecorder.Options, String)] = [
            (.init(from: .seconds(5)), "--from 5 is beyond the capture, which lasts 3.029 s"),
            (.init(to: .seconds(4)), "--to 4 is beyond the capture, which lasts 3.029 s"),
            (.init(from: .seconds(2), to: .seconds(1)), "--from 2 is not before --to 1"),
            (.init(from: .milliseconds(-1)), "--from -0.001 is negative; give seconds from the capture's first packet"),
        ]
        for (option, message) in options {
            #expect(TestCapture.recordError(TestCapture.classic(packets), option) == message)
        }
    }

    @Test func idleStretchesAreReportedWithTheLongestAndItsMoment() throws {
        // A second of arrivals, nothing for 2 s, another second; with --from 0 the 30 ms before
        // the data do not count (under 200 ms).
        let data = self.steady(from: 30, count: 1_000) + self.steady(from: 3_029, count: 1_000)
        let recording = try self.record(TestCapture.download(data: data))
        #expect(recording.idle.threshold == .milliseconds(200))
        #expect(
            recording.idle.stretches == [
                TraceRecording.IdleStretch(start: .milliseconds(1_029), length: .milliseconds(2_000))
            ])
        #expect(recording.idle.longest?.start == .milliseconds(1_029))
        #expect(
            recording.report(traceFile: "x.trace", profileFile: "x.yaml", loaded: recording.trace.linkTrace).contains {
                $0.contains("1 stretch without arrivals over 200 ms, 2.000 s in all, the longest 2.000 s at 1.029 s")
            })
        // A window that starts well before the data: the wait replays as no capacity too.
        let early = try self.record(TestCapture.download(data: self.steady(from: 500, count: 100)), .init(from: .zero))
        #expect(early.idle.stretches == [TraceRecording.IdleStretch(start: .zero, length: .milliseconds(500))])
        #expect(TestCapture.times(early).first == 500)
    }

    // MARK: - Round trip

    @Test func aCaptureOfATracesOpportunitiesRecordsBackToThatTrace() throws {
        // A made-up trace: 0 to 4 opportunities each millisecond for 2 s, ending on one.
        var times: [Int64] = []
        for ms in Int64(1)...2_000 {
            let count = ms == 2_000 ? 1 : Int((ms * 7 + ms / 13) % 5)
            times += [Int64](repeating: ms, count: count)
        }
        let original = LinkTrace(milliseconds: times, source: "made.trace")
        // The handshake before the first millisecond; a 1,500-byte packet at each opportunity.
        let data = times.map { (ms: Double($0), payload: 1_460) }
        let packets = TestCapture.download(syn: 0, synAck: 200_000, ack: 300_000, data: data)
        let recording = try self.record(packets, .init(from: .zero))
        #expect(recording.trace.millisecondsText == original.millisecondsText)
        let readBack = try LinkTrace.parse(recording.traceText, source: "made.trace")
        #expect(readBack == original)
        #expect(recording.idle.stretches.isEmpty)
    }

    @Test func theProfileWrittenReadsBackThroughTheLoader() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-trace-record-\(getpid())")
            .path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let recording = try self.record(TestCapture.download(data: self.steady(from: 30, count: 50), skipping: [10]))
        try recording.traceText.write(toFile: folder + "/my \"train\".trace", atomically: true, encoding: .utf8)
        let yaml = recording.profileYAML(
            name: "my \"train\"", traceFile: "my \"train\".trace", captureName: "c:\\x.pcap")
        try yaml.write(toFile: folder + "/my.yaml", atomically: true, encoding: .utf8)
        let profile = try ProfileCatalog.resolve(folder + "/my.yaml")
        #expect(profile.name == "my \"train\"")
        #expect(profile.source.contains("c:\\x.pcap, flow 10.0.0.2:51000 -> 192.0.2.7:443"))
        #expect(profile.source.hasSuffix("recorded by netcond trace record"))
        #expect(profile.down.trace?.millisecondsText == recording.trace.millisecondsText)
        #expect(profile.down.latency == .microseconds(10_050))
        #expect(profile.up.latency == .microseconds(10_050))
        #expect(profile.down.loss == .bernoulli(Probability(0.02)))
        #expect(profile.up.trace == nil)
    }
}
