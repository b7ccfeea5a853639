import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondProxy

/// The client side of the proxy in an `EmbeddedChannel`: sniffing and the answers that need no upstream.
@Suite struct HTTPProxyHandlerTests {
    func makeChannel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let stats = ProxyStats()
        let shaper = LinkShaper(driver: nil, stats: stats)
        let connector = UpstreamConnector(
            eventLoop: channel.embeddedEventLoop,
            driver: nil,
            overrides: HostOverrides(),
            stats: stats
        )
        let sniffer = ProtocolSniffer(shaper: shaper, connector: connector)
        try channel.pipeline.syncOperations.addHandlers([shaper, sniffer])
        return channel
    }

    func response(_ channel: EmbeddedChannel) throws -> String {
        try channel.outboundText()
    }

    @Test func originFormWithoutHostIsRefusedWithAReason() throws {
        let channel = try self.makeChannel()
        try channel.writeInbound(ByteBuffer(string: "GET /index.html HTTP/1.1\r\n\r\n"))
        let text = try self.response(channel)
        #expect(text.hasPrefix("HTTP/1.1 400"))
        #expect(text.contains("send an absolute URL"))
        #expect(text.lowercased().contains("connection: close"))
    }

    @Test func connectWithoutAPortIsRefused() throws {
        let channel = try self.makeChannel()
        try channel.writeInbound(ByteBuffer(string: "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        let text = try self.response(channel)
        #expect(text.hasPrefix("HTTP/1.1 400"))
        #expect(text.contains("CONNECT needs host:port"))
    }

    @Test func connectIsRecognisedEvenWhenItsFirstBytesArriveAlone() throws {
        let channel = try self.makeChannel()
        try channel.writeInbound(ByteBuffer(string: "CONN"))
        #expect(try self.response(channel).isEmpty)
        try channel.writeInbound(ByteBuffer(string: "ECT bad HTTP/1.1\r\n\r\n"))
        #expect(try self.response(channel).contains("CONNECT needs host:port"))
    }

    @Test func garbageGetsA400() throws {
        let channel = try self.makeChannel()
        _ = try? channel.writeInbound(ByteBuffer(string: "\u{1}\u{2} NOT HTTP\r\n\r\n"))
        #expect(try self.response(channel).hasPrefix("HTTP/1.1 400"))
    }

    @Test func socks4IsRejectedInItsOwnLanguage() throws {
        let channel = try self.makeChannel()
        try channel.writeInbound(ByteBuffer(bytes: [4, 1, 0, 80, 127, 0, 0, 1, 0]))
        var reply = try channel.readOutbound(as: ByteBuffer.self)
        #expect(reply?.readBytes(length: 2) == [0, 0x5B])
    }

    @Test func socks5GreetingIsAnsweredWithoutShaping() throws {
        let channel = try self.makeChannel()
        try channel.writeInbound(ByteBuffer(bytes: [5, 1, 0]))
        var reply = try channel.readOutbound(as: ByteBuffer.self)
        #expect(reply?.readBytes(length: 2) == [5, 0])
    }

    @Test func authoritiesAreParsedStrictly() {
        #expect(
            UpstreamTarget(authority: "example.com:8080", defaultPort: nil)
                == UpstreamTarget(host: "example.com", port: 8080))
        #expect(UpstreamTarget(authority: "[::1]:443", defaultPort: nil) == UpstreamTarget(host: "::1", port: 443))
        #expect(
            UpstreamTarget(authority: "example.com", defaultPort: 80) == UpstreamTarget(host: "example.com", port: 80))
        for bad in [
            "127.0.0.1:+80", "127.0.0.1:1:1", "::1:443", "host: 80", "host:", "host:65536", "host:0", "host:123456",
            "[::1]x",
        ] {
            #expect(UpstreamTarget(authority: bad, defaultPort: 80) == nil, "\(bad)")
        }
    }

    @Test func framingThatABackendCouldReadDifferentlyIsRefused() {
        func head(_ version: HTTPVersion, _ headers: [(String, String)]) -> HTTPRequestHead {
            HTTPRequestHead(version: version, method: .POST, uri: "http://h/", headers: HTTPHeaders(headers))
        }
        #expect(
            HTTPRequestRouting.framingProblem(head(.http1_1, [("Host", "h"), ("Transfer-Encoding", "chunked")])) == nil)
        #expect(HTTPRequestRouting.framingProblem(head(.http1_0, [("Host", "h"), ("Content-Length", "3")])) == nil)
        #expect(
            HTTPRequestRouting.framingProblem(head(.http1_0, [("Transfer-Encoding", "chunked")]))?.contains(
                "RFC 9112 §6.1") == true)
        #expect(
            HTTPRequestRouting.framingProblem(
                head(.http1_1, [("Transfer-Encoding", "chunked"), ("Content-Length", "3")])) != nil)
        #expect(
            HTTPRequestRouting.framingProblem(head(.http1_1, [("Host", "a"), ("host", "b")]))
                == "more than one Host header; send exactly one")
    }

    @Test func headerBytesThatAreNotUTF8AreRefusedNotRewritten() throws {
        let rig = try ProxyRig(profile: Profile(name: "t"), shaped: false)
        var request = ByteBuffer(
            string: "GET http://origin.netcond.test/file HTTP/1.1\r\nHost: origin.netcond.test\r\nX-Name: caf")
        request.writeBytes([0xE9, 0xFF])  // Latin-1 é, and a byte no text has
        request.writeString("\r\nContent-Length: 0\r\n\r\n")
        try rig.client.writeInbound(request)
        rig.advance(1)
        let answer = try rig.received()
        #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer)")
        #expect(answer.contains("'X-Name' holds bytes that are not UTF-8"), "\(answer)")
        #expect(rig.connectsAttempted == 0, "nothing altered reaches a server")
        // Valid UTF-8 passes.
        let other = try ProxyRig(profile: Profile(name: "t"), shaped: false)
        try other.client.writeInbound(
            ByteBuffer(
                string:
                    "GET http://origin.netcond.test/file HTTP/1.1\r\nHost: origin.netcond.test\r\nX-Name: café\r\nContent-Length: 0\r\n\r\n"
            ))
        other.advance(1)
        #expect(other.connectsAttempted == 1)
        #expect(try other.sentUpstream().contains("X-Name: café\r\n"))
    }

    @Test func aResponseHeaderThatIsNotUTF8IsPassedOnButNamedInTheEventLog() throws {
        let rig = try ProxyRig(profile: Profile(name: "t"), shaped: false)
        try rig.request("GET", "/file")
        rig.advance(1)
        var response = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Disposition: attachment; filename=caf")
        response.writeBytes([0xE9])
        response.writeString(".txt\r\nContent-Length: 2\r\n\r\nok")
        try rig.upstreams[0].writeInbound(response)
        rig.advance(1)
        #expect(try rig.received().hasSuffix("\r\n\r\nok"), "the response goes on")
        let altered = rig.rules.eventsWithPending.filter { $0.kind == .altered }
        #expect(altered.count == 1)
        #expect(
            altered.first?.detail.contains("('Content-Disposition') held bytes that are not UTF-8") == true,
            "\(altered)")
        #expect(altered.first?.host == "origin.netcond.test")
    }
}
