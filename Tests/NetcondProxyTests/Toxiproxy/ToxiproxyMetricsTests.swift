import Foundation
import NIOCore
import NIOEmbedded
import NIOPosix
import NetcondCore
import Testing

@testable import NetcondProxy

/// The Toxiproxy API's `GET /metrics`: Toxiproxy's names and labels, and bytes that really passed
/// a proxy (on loopback) counted each stream, received and sent.
@Suite struct ToxiproxyMetricsTests {
    /// Echoes what it reads: the server's side of the proxy.
    final class Echo: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }
    }

    @Test func bytesThroughAProxyMoveItsCounters() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let echo = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Echo()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let server = ToxiproxyServer(seed: 1)
        let tests = ToxiproxyServerTests()
        let upstream = "127.0.0.1:\(echo.localAddress?.port ?? 0)"
        let (status, created) = await tests.call(
            server, "POST", "/proxies", "{\"name\": \"echo\", \"upstream\": \"\(upstream)\"}")
        #expect(status == 201)
        let listen = try #require((created as? [String: Any])?["listen"] as? String)
        let empty = try ScrapedMetrics(await server.metricsAnswer().json)
        let labels = ["proxy": "echo", "listener": listen, "upstream": upstream]
        #expect(
            empty.value("toxiproxy_proxy_received_bytes_total", labels.merging(["direction": "upstream"]) { $1 }) == 0)

        let port = try #require(Int(listen.split(separator: ":").last ?? ""))
        let client = try await ClientBootstrap(group: group).connect(host: "127.0.0.1", port: port).get()
        try await client.writeAndFlush(ByteBuffer(string: String(repeating: "x", count: 1000))).get()
        var scraped = empty
        for _ in 0..<100 {  // the echo comes back within a few milliseconds; 5 s at most
            scraped = try ScrapedMetrics(await server.metricsAnswer().json)
            if scraped.value("toxiproxy_proxy_sent_bytes_total", labels.merging(["direction": "downstream"]) { $1 })
                == 1000
            {
                break
            }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        for name in ["received", "sent"] {
            for direction in ["upstream", "downstream"] {
                let series = "toxiproxy_proxy_\(name)_bytes_total"
                #expect(scraped.types[series] == "counter")
                #expect(scraped.value(series, labels.merging(["direction": direction]) { $1 }) == 1000)
            }
        }
        try await client.close()
        await server.stop()
        try await echo.close()
        // A proxy gone has no series left.
        #expect(try ScrapedMetrics(await server.metricsAnswer().json).samples.isEmpty)
    }

    /// `--netcond-link`: the connection sits in a netcond forward; what the client sent goes on up
    /// the pipeline, what the link delivers comes down through the handler: each counted once.
    @Test func aForwardsConnectionCountsEachStreamOnce() throws {
        let handler = ToxicConnectionHandler(seed: SeedDeriver.derive(1, 1), wiring: .forward)
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        handler.update([])
        try channel.writeInbound(ByteBuffer(string: "hello"))
        try channel.writeOutbound(ByteBuffer(string: "welcome"))
        channel.embeddedEventLoop.run()
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "hello"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "welcome"))
        let totals = handler.wiring.streams.tally.now
        #expect(
            totals
                == ToxicTally.Totals(
                    receivedUpstream: 5, sentUpstream: 5, receivedDownstream: 7, sentDownstream: 7))
        _ = try? channel.finish()
    }
}
