import NIOCore
import NIOEmbedded
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
        let sniffer = ProtocolSniffer(shaper: shaper, connector: connector, selfAddresses: [])
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
}
