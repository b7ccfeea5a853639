import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// Every HTTP fault applied by the proxy, in virtual time: the client and the upstream are
/// `EmbeddedChannel`s on one `EmbeddedEventLoop`, so the moment each byte and each close happens
/// is exact.
@Suite struct HTTPFaultTests {
    final class Rig {
        let loop = EmbeddedEventLoop()
        let client: EmbeddedChannel
        let rules: ProxyRules
        var upstreams: [EmbeddedChannel] = []

        init(_ faults: [HTTPFault]) throws {
            let loop = self.loop
            let stats = ProxyStats()
            let rules = ProxyRules(profile: Profile(name: "t", faults: faults), seed: 1, startedAt: loop.now, eventLoop: loop)
            self.rules = rules
            var connector = UpstreamConnector(eventLoop: loop, driver: nil, overrides: HostOverrides(), stats: stats, rules: rules)
            self.client = EmbeddedChannel(loop: loop)
            connector.connectOverride = { [unowned self] _ in
                let upstream = EmbeddedChannel(loop: loop)
                _ = upstream.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 80))
                self.upstreams.append(upstream)
                return loop.makeSucceededFuture(upstream)
            }
            let shaper = LinkShaper(driver: nil, stats: stats)
            let sniffer = ProtocolSniffer(shaper: shaper, connector: connector, selfAddresses: [])
            try self.client.pipeline.syncOperations.addHandlers([shaper, sniffer])
            try self.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50000)).wait()
            precondition(self.client.isActive)
        }

        func request(_ method: String = "GET", _ path: String = "/file") throws {
            try self.client.writeInbound(
                ByteBuffer(string: "\(method) http://origin.netcond.test\(path) HTTP/1.1\r\nHost: origin.netcond.test\r\nContent-Length: 0\r\n\r\n")
            )
        }

        /// What the client has received so far.
        func received() throws -> String {
            var text = ""
            while var buffer = try self.client.readOutbound(as: ByteBuffer.self) {
                text += buffer.readString(length: buffer.readableBytes) ?? ""
            }
            return text
        }

        /// What the upstream has been sent so far.
        func sentUpstream(_ index: Int = 0) throws -> String {
            var text = ""
            while var buffer = try self.upstreams[index].readOutbound(as: ByteBuffer.self) {
                text += buffer.readString(length: buffer.readableBytes) ?? ""
            }
            return text
        }

        func respond(_ body: String, index: Int = 0, headers: String = "") throws {
            try self.upstreams[index].writeInbound(
                ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\(headers)\r\n\(body)")
            )
        }
    }

    @Test func aStatusFaultAnswersWithoutTheServerAndKeepsTheConnection() throws {
        let rig = try Rig([HTTPFault(action: .status(503, retryAfter: .seconds(5)), select: FaultSelection(first: 1))])
        try rig.request()
        let answer = try rig.received()
        #expect(answer.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(answer.contains("Retry-After: 5\r\n"))
        #expect(answer.hasSuffix("netcond fault: 503 Service Unavailable\n"))
        #expect(rig.upstreams.isEmpty)
        try rig.request()
        #expect(try rig.sentUpstream().hasPrefix("GET /file HTTP/1.1\r\n"))
        try rig.respond("hello")
        #expect(try rig.received().hasSuffix("\r\n\r\nhello"))
        #expect(rig.client.isActive)
    }

    @Test func firstByteHoldsTheResponseExactlyThatLong() throws {
        let rig = try Rig([HTTPFault(action: .firstByte(.seconds(2)))])
        try rig.request()
        #expect(try rig.sentUpstream().hasPrefix("GET /file HTTP/1.1\r\n"))  // the server has it at once
        rig.loop.advanceTime(by: .milliseconds(300))
        try rig.respond("hello")
        rig.loop.advanceTime(by: .milliseconds(1699))
        #expect(try rig.received().isEmpty)
        rig.loop.advanceTime(by: .milliseconds(1))
        let answer = try rig.received()
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix("\r\n\r\nhello"))
    }

    @Test func truncateAfterClosesMidBody() throws {
        let rig = try Rig([HTTPFault(action: .truncateAfter(ByteCount(bytes: 3)))])
        try rig.request()
        try rig.respond("hello world")
        rig.loop.run()
        #expect(try rig.received().hasSuffix("Content-Length: 11\r\n\r\nhel"))
        #expect(!rig.client.isActive)
        #expect(!rig.upstreams[0].isActive)
    }

    @Test func resetAfterCutsTheBodyToo() throws {
        let rig = try Rig([HTTPFault(action: .resetAfter(ByteCount(bytes: 0)))])
        try rig.request()
        try rig.respond("hello")
        rig.loop.run()
        #expect(try rig.received().hasSuffix("Content-Length: 5\r\n\r\n"))
        #expect(!rig.client.isActive)
        #expect(!rig.upstreams[0].isActive)
    }

    @Test func dropResponseLetsTheServerProcessItAndAnswersNothing() throws {
        let rig = try Rig([HTTPFault(match: RequestMatch(method: "POST"), action: .dropResponse)])
        try rig.request("POST", "/orders")
        #expect(try rig.sentUpstream().hasPrefix("POST /orders HTTP/1.1\r\n"))
        try rig.respond("{\"order\": 1}")
        rig.loop.run()
        #expect(try rig.received().isEmpty)
        #expect(!rig.client.isActive)
        #expect(!rig.upstreams[0].isActive)
    }

    @Test func slowCloseClosesThatMuchAfterTheResponse() throws {
        let rig = try Rig([HTTPFault(action: .slowClose(.seconds(1)))])
        try rig.request()
        try rig.respond("hello")
        let answer = try rig.received()
        #expect(answer.contains("Connection: close\r\n") && answer.hasSuffix("hello"))
        rig.loop.advanceTime(by: .milliseconds(999))
        #expect(rig.client.isActive)
        rig.loop.advanceTime(by: .milliseconds(1))
        #expect(!rig.client.isActive)
    }

    @Test func everyHitIsLoggedWithTheRequestAndItsTime() throws {
        let rig = try Rig([HTTPFault(name: "flaky", action: .status(500, retryAfter: nil), select: FaultSelection(first: 1))])
        rig.loop.advanceTime(by: .milliseconds(1500))
        try rig.request("GET", "/a?b=1")
        try rig.request("GET", "/a?b=2")
        let hits = rig.rules.events.filter { $0.kind == .fault }
        #expect(hits == [
            ProxyEvent(at: 1.5, kind: .fault, detail: "fault 1 (flaky): GET http://origin.netcond.test/a?b=1", fault: 1,
                       method: "GET", host: "origin.netcond.test", path: "/a?b=1")
        ])
    }
}
