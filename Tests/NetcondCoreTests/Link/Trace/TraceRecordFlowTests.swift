import Testing

@testable import NetcondCore

/// `trace record --flow`: what it accepts, and the connection it chooses.
@Suite struct TraceRecordFlowTests {
    @Test func flowTakesANumberOrTwoEndpointsInEitherOrder() {
        let a = CapturedSegment.Endpoint(address: [192, 0, 2, 1], port: 443)
        let b = CapturedSegment.Endpoint(address: [10, 0, 0, 2], port: 51_234)
        #expect(FlowChoice.parse("3") == .number(3))
        #expect(FlowChoice.parse("192.0.2.1:443-10.0.0.2:51234") == .endpoints(a, b))
        let v6 = FlowChoice.parse("[2001:db8::1]:443-[::ffff:0:2]:1")
        #expect(
            v6
                == .endpoints(
                    CapturedSegment.Endpoint(
                        address: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1], port: 443),
                    CapturedSegment.Endpoint(
                        address: [UInt8](repeating: 0, count: 10) + [0xff, 0xff, 0, 0, 0, 2], port: 1)))
        for bad in [
            "0", "-1", "", "1.2.3.4:5", "1.2.3.4:5-6.7.8.9", "1.2.3.256:1-1.2.3.4:2", "[1::2::3]:1-[::1]:2",
            "[12345::1]:1-[::1]:2", "1.2.3.4:70000-1.2.3.5:1", "a-b", "[::1]:1-[::1]:2-[::1]:3", "٣",
        ] {
            #expect(FlowChoice.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func flowRecordsTheConnectionItNames() throws {
        let other = TestCapture.Host(address: [10, 0, 0, 9], port: 40_000)
        let big = TestCapture.download(data: (0..<40).map { (30 + Double($0), 1_460) })
        let small = TestCapture.download(data: (0..<10).map { (35 + Double($0), 1_460) }, client: other)
        let file = TestCapture.classic((big + small).sorted { $0.nanoseconds < $1.nanoseconds }, nanoseconds: true)
        #expect(try TestCapture.record(file).packets == 40)
        let named = try TestCapture.record(file, .init(flow: FlowChoice.parse("192.0.2.7:443-10.0.0.9:40000")))
        #expect(named.packets == 10)
        #expect(named.client == CapturedSegment.Endpoint(address: other.address, port: other.port))
        #expect(try TestCapture.record(file, .init(flow: .number(2))).packets == 10)
        let error = TestCapture.recordError(file, .init(flow: .number(3))) ?? ""
        #expect(error.contains("--flow 3 names no connection in the capture; allowed: a number from 1 to 2"))
        #expect(error.contains("  2  10.0.0.9:40000 -> 192.0.2.7:443  down 11 packets 14.6 kB, up 2 packets 0 B"))
        let up = TestCapture.recordError(file, .init(direction: .up, flow: .number(1))) ?? ""
        #expect(up.contains("connection 1 (10.0.0.2:51000 -> 192.0.2.7:443) carried no data up, toward the server"))
    }
}
