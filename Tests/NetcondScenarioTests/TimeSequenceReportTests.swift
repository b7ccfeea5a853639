import Foundation
import NetcondCore
import Testing

@testable import NetcondScenario

/// The time–sequence page: every series drawn with its own class, the drops and retransmissions
/// counted in words, labelled axes, and what came from the capture escaped.
@Suite struct TimeSequenceReportTests {
    @Test func aConnectionIsDrawnWithItsSeriesAndAxes() {
        let sender = CapturedSegment.Endpoint(address: [127, 110, 0, 1], port: 80)
        let receiver = CapturedSegment.Endpoint(address: [127, 0, 0, 1], port: 40_000)
        var connection = TimeSequence.Connection(
            sender: sender, receiver: receiver, startedAt: 1_700_000_000_000_000_000, duration: 2)
        connection.segments = [
            .init(at: 0.1, start: 0, end: 1448, retransmission: false),
            .init(at: 0.2, start: 1448, end: 2896, retransmission: false),
            .init(at: 0.9, start: 1448, end: 2896, retransmission: true),
        ]
        connection.dropped = [.init(at: 0.2, start: 1448, end: 2896, retransmission: false)]
        connection.acknowledgements = [
            .init(at: 0.15, ack: 1448, window: 65_000), .init(at: 1.0, ack: 2896, window: 66_000),
        ]
        connection.flags = [.init(at: 0, kind: "SYN", fromSender: false)]
        connection.windowScaleKnown = true
        let page = TimeSequenceReport.render(
            TimeSequence(connections: [connection], otherPackets: 2), source: "<run>.pcap", drops: "drops.pcap")
        #expect(page.contains("&lt;run&gt;.pcap") && !page.contains("<run>"))
        #expect(page.contains("127.110.0.1:80 → 127.0.0.1:40000"))
        #expect(page.contains("3 KB sent in 2 s · 1 retransmission · 1 segment dropped by the link"))
        #expect(
            page.contains(#"<path class="data""#) && page.contains(#"<path class="retx""#)
                && page.contains(#"<path class="retx-mark""#))
        #expect(
            page.contains(#"<path class="drop""#) && page.contains(#"<polyline class="ack""#)
                && page.contains(#"<polyline class="window""#))
        #expect(page.contains("2 other packets (not TCP over IP) left out"))
        #expect(page.contains(">0s</text>") && page.contains(">0 B</text>") && page.contains(">20 KB</text>"))
        #expect(!page.contains("<script"), "a page with no script")
        #expect(TimeSequenceReport.byteStep(800 * 1024) == 200 * 1024)
        #expect(TimeSequenceReport.byteStep(5) == 1)
    }
}
