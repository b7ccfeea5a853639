import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// The proxy shows the client what the network would, in virtual time: a server's close crosses the
/// link (and is never turned into an answer of netcond's own), and a client that leaves while its
/// connection is still being made takes its request with it.
@Suite struct ProxyFidelityTests {
    /// A client channel behind a link of 50 ms each way, the upstreams `EmbeddedChannel`s; every
    /// channel is on one `EmbeddedEventLoop`, so each moment is exact.
    final class Rig {
        let loop = EmbeddedEventLoop()
        let client: EmbeddedChannel
        let rules: ProxyRules
        let driver: LinkDriver
        var upstreams: [EmbeddedChannel] = []
        var connectsAttempted = 0

        init(setup: SetupRules = SetupRules()) throws {
            let loop = self.loop
            let stats = ProxyStats()
            let profile = Profile(
                name: "t", up: LinkDirection(latency: .milliseconds(50)), down: LinkDirection(latency: .milliseconds(50)),
                setup: setup)
            self.rules = ProxyRules(profile: profile, seed: 1, startedAt: loop.now, eventLoop: loop)
            self.driver = LinkDriver(profile: profile, seed: 1, eventLoop: loop, epoch: loop.now)
            var connector = UpstreamConnector(
                eventLoop: loop, driver: self.driver, overrides: HostOverrides(), stats: stats, rules: self.rules)
            self.client = EmbeddedChannel(loop: loop)
            connector.connectOverride = { [unowned self] _ in
                self.connectsAttempted += 1
                let upstream = EmbeddedChannel(loop: loop)
                _ = upstream.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 80))
                self.upstreams.append(upstream)
                return loop.makeSucceededFuture(upstream)
            }
            let shaper = LinkShaper(driver: self.driver, stats: stats)
            let sniffer = ProtocolSniffer(shaper: shaper, connector: connector, selfAddresses: [])
            try self.client.pipeline.syncOperations.addHandlers([shaper, sniffer])
            try self.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50000)).wait()
        }

        func advance(_ milliseconds: Int64) {
            self.loop.advanceTime(by: .milliseconds(milliseconds))
        }

        func request(_ method: String = "POST", _ path: String = "/api/orders") throws {
            try self.client.writeInbound(
                ByteBuffer(string: "\(method) http://origin.netcond.test\(path) HTTP/1.1\r\nHost: origin.netcond.test\r\nContent-Length: 0\r\n\r\n")
            )
        }

        /// The client sends FIN (it closed its socket, or shut down its sending side).
        func clientCloses() {
            self.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }

        func received() throws -> String {
            var text = ""
            while var buffer = try self.client.readOutbound(as: ByteBuffer.self) {
                text += buffer.readString(length: buffer.readableBytes) ?? ""
            }
            return text
        }

        func sentUpstream(_ index: Int = 0) throws -> String {
            var text = ""
            while var buffer = try self.upstreams[index].readOutbound(as: ByteBuffer.self) {
                text += buffer.readString(length: buffer.readableBytes) ?? ""
            }
            return text
        }
    }

    @Test func aServerThatClosesWithoutAnsweringClosesTheClientOneWayLaterWithNoAnswerOfItsOwn() throws {
        let rig = try Rig()
        try rig.request()
        rig.advance(50)  // the request crosses the link
        rig.advance(100)  // the handshake's round trip
        #expect(try rig.sentUpstream().hasPrefix("POST /api/orders HTTP/1.1\r\n"))
        // The server did the work and closed without a response.
        rig.upstreams[0].pipeline.fireChannelInactive()
        rig.advance(49)
        #expect(rig.client.isActive, "the server's FIN is still on the link")
        rig.advance(1)
        #expect(!rig.client.isActive)
        #expect(try rig.received().isEmpty, "no 502, no bytes at all: the response was lost")
    }

    @Test func aResponseCutShortEndsAfterItsLastByte() throws {
        let rig = try Rig()
        try rig.request("GET", "/file")
        rig.advance(150)
        try rig.upstreams[0].writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"))
        rig.upstreams[0].pipeline.fireChannelInactive()
        rig.advance(49)
        #expect(try rig.received().isEmpty)
        #expect(rig.client.isActive)
        rig.advance(1)
        #expect(try rig.received().hasSuffix("\r\n\r\nhello"))
        #expect(!rig.client.isActive, "the FIN right behind the bytes")
    }

    @Test func aRefusalIsAResetNotA502() throws {
        // A firewall that refuses port 80: one round trip after the attempt, the client's connection ends.
        let rig = try Rig(setup: SetupRules(allowPorts: [443]))
        try rig.request("GET", "/file")
        rig.advance(50)
        rig.advance(99)
        #expect(rig.client.isActive)
        rig.advance(1)
        #expect(!rig.client.isActive)
        #expect(try rig.received().isEmpty)
        #expect(rig.rules.eventsWithPending.contains { $0.kind == .connect && $0.attempt == .refused })
    }

    @Test func aClientThatLeavesWhileItsConnectIsHeldTakesItsRequestWithIt() throws {
        // The first connection waits 3 s (a desktop firewall asking); the client gives up at 1 s.
        let rig = try Rig(setup: SetupRules(hold: .seconds(3), holdFirst: 1))
        try rig.request()
        rig.advance(1000)
        rig.clientCloses()
        #expect(!rig.client.isActive)
        rig.advance(10_000)
        // The real connection (made at once) was closed unused; nothing was ever written to it.
        #expect(rig.upstreams.allSatisfy { !$0.isActive })
        #expect(try rig.upstreams.indices.allSatisfy { try rig.sentUpstream($0).isEmpty })
        let events = rig.rules.eventsWithPending.filter { $0.kind == .connect }
        #expect(events.map(\.attempt) == [.abandoned])
    }

    @Test func aClientThatHalfClosesRightAfterItsRequestStillGetsItsAnswer() throws {
        let rig = try Rig()
        try rig.request("GET", "/file")
        rig.clientCloses()  // before the handshake could have finished: not a client leaving
        rig.advance(150)
        #expect(try rig.sentUpstream().hasPrefix("GET /file HTTP/1.1\r\n"))
        try rig.upstreams[0].writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        rig.advance(50)
        #expect(try rig.received().hasSuffix("\r\n\r\nok"))
    }

    @Test func aClientThatLeavesInABlackholeNeverReachesTheServer() throws {
        let rig = try Rig()
        rig.driver.setOutage(.blackhole)
        try rig.request()
        rig.advance(2000)
        rig.clientCloses()
        #expect(!rig.client.isActive)
        rig.driver.setOutage(nil)
        rig.advance(130_000)
        #expect(rig.connectsAttempted == 0, "the request never left the link")
    }
}
