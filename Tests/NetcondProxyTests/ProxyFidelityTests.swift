import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// The proxy shows the client what the network would, in virtual time: a server's close crosses the
/// link (and is never turned into an answer of netcond's own), and a client that leaves while its
/// connection is still being made takes its request with it.
@Suite struct ProxyFidelityTests {
    /// A client behind a link of 50 ms each way.
    func makeRig(setup: SetupRules = SetupRules()) throws -> ProxyRig {
        let profile = Profile(
            name: "t", up: LinkDirection(latency: .milliseconds(50)), down: LinkDirection(latency: .milliseconds(50)),
            setup: setup)
        return try ProxyRig(profile: profile, shaped: true)
    }

    @Test func aServerThatClosesWithoutAnsweringClosesTheClientOneWayLaterWithNoAnswerOfItsOwn() throws {
        let rig = try self.makeRig()
        try rig.request("POST", "/api/orders")
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
        let rig = try self.makeRig()
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
        let rig = try self.makeRig(setup: SetupRules(allowPorts: [443]))
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
        let rig = try self.makeRig(setup: SetupRules(hold: .seconds(3), holdFirst: 1))
        try rig.request("POST", "/api/orders")
        rig.advance(1000)
        rig.clientCloses()
        #expect(!rig.client.isActive)
        rig.advance(10_000)
        // Its SYN never left: the server never saw a connection at all.
        #expect(rig.connectsAttempted == 0)
        let events = rig.rules.eventsWithPending.filter { $0.kind == .connect }
        #expect(events.map(\.attempt) == [.abandoned])
    }

    @Test func theServerSeesTheConnectionOnlyWhenTheSYNThatGetsThroughLeaves() throws {
        // Held 3 s before its handshake starts: the real connection begins then, not before.
        let rig = try self.makeRig(setup: SetupRules(hold: .seconds(3), holdFirst: 1))
        try rig.request("GET", "/file")
        rig.advance(50)  // the request crosses the link; the hold begins
        rig.advance(2999)
        #expect(rig.connectsAttempted == 0)
        rig.advance(1)
        #expect(rig.connectsAttempted == 1)
        rig.advance(99)
        #expect(try rig.sentUpstream().isEmpty, "the handshake's round trip is not over")
        rig.advance(1)
        #expect(try rig.sentUpstream().hasPrefix("GET /file HTTP/1.1\r\n"))
    }

    @Test func anOutageThatRefusesOrBlackholesNeverOpensARealConnection() throws {
        for outage in [OutageBehaviour.refuse, .blackhole] {
            let rig = try self.makeRig()
            try rig.request("GET", "/file")
            rig.advance(20)
            rig.driver?.setOutage(outage)  // before the request has crossed: its SYN meets the outage
            rig.advance(10_000)
            #expect(rig.connectsAttempted == 0, "\(outage)")
            if outage == .refuse {
                #expect(!rig.client.isActive, "a refusal resets the client's connection")
                #expect(try rig.received().isEmpty)
            }
        }
    }

    @Test func aConnectionMadeOnlyAfterABlackholeIsNotedWithHowLongItWasHeld() throws {
        let rig = try self.makeRig()
        rig.driver?.setOutage(.blackhole)
        try rig.request("GET", "/file")
        rig.advance(8000)
        rig.driver?.setOutage(nil)
        rig.advance(30_000)
        #expect(rig.connectsAttempted == 1)
        let held = rig.rules.eventsWithPending.filter { $0.kind == .held }
        #expect(held.count == 1)
        // Unimpeded, the connection would have been there after 150 ms (the request's way up and
        // the handshake's round trip); it was held at least the 8 s of the outage.
        #expect((held.first?.heldFor ?? 0) >= 7.85, "\(held)")
        // An unimpeded connection is not noted.
        let clear = try self.makeRig()
        try clear.request("GET", "/file")
        clear.advance(1000)
        #expect(clear.connectsAttempted == 1)
        #expect(!clear.rules.eventsWithPending.contains { $0.kind == .held })
    }

    @Test func aConnectionTheCaptivePortalAnsweredIsNotNotedAsHeldWhenItGoesOnToTheServer() throws {
        // captive-then-login through a client that keeps its connection (URLSession, Node's http):
        // the portal answers its first request itself; 6 s later, logged in, the next request on
        // the same connection goes to the origin at once. Nothing held it: no mark.
        let profile = Profile(
            name: "t", up: LinkDirection(latency: .milliseconds(50)), down: LinkDirection(latency: .milliseconds(50)),
            captivePortal: CaptivePortalSpec())
        let rig = try ProxyRig(profile: profile, shaped: true)
        try rig.request("GET", "/file")
        rig.advance(200)
        #expect(try rig.received().contains("200"), "the portal's page")
        #expect(rig.connectsAttempted == 0)
        rig.advance(5800)
        rig.rules.setPortal(open: true, now: rig.loop.now)
        try rig.request("GET", "/file")
        rig.advance(1000)
        #expect(rig.connectsAttempted == 1)
        #expect(try rig.sentUpstream().hasPrefix("GET /file HTTP/1.1\r\n"))
        let held = rig.rules.eventsWithPending.filter { $0.kind == .held }
        #expect(held.isEmpty, "\(held.map(\.detail))")
    }

    @Test func aConnectionOpenedAheadOfItsFirstRequestIsNotNotedAsHeld() throws {
        // A client that connects, then sends its request 5 s later (a connection opened ahead of
        // need): its connect was over on any network long before.
        let rig = try self.makeRig()
        rig.advance(5000)
        try rig.request("GET", "/file")
        rig.advance(1000)
        #expect(rig.connectsAttempted == 1)
        #expect(!rig.rules.eventsWithPending.contains { $0.kind == .held })
    }

    @Test func aClientThatHalfClosesRightAfterItsRequestStillGetsItsAnswer() throws {
        let rig = try self.makeRig()
        try rig.request("GET", "/file")
        rig.clientCloses()  // before the handshake could have finished: not a client leaving
        rig.advance(150)
        #expect(try rig.sentUpstream().hasPrefix("GET /file HTTP/1.1\r\n"))
        try rig.upstreams[0].writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        rig.advance(50)
        #expect(try rig.received().hasSuffix("\r\n\r\nok"))
    }

    @Test func aClientThatLeavesInABlackholeNeverReachesTheServer() throws {
        let rig = try self.makeRig()
        rig.driver?.setOutage(.blackhole)
        try rig.request("POST", "/api/orders")
        rig.advance(2000)
        rig.clientCloses()
        #expect(!rig.client.isActive)
        rig.driver?.setOutage(nil)
        rig.advance(130_000)
        #expect(rig.connectsAttempted == 0, "the request never left the link")
    }

    @Test func aServerClosingAnIdleKeepAliveConnectionClosesTheClientsToo() throws {
        let rig = try self.makeRig()
        try rig.request("GET", "/file")
        rig.advance(150)
        try rig.respond("ok")
        rig.advance(50)
        #expect(try rig.received().hasSuffix("\r\n\r\nok"))
        // Idle; the server's keep-alive time-out closes its side.
        rig.advance(5000)
        rig.upstreams[0].pipeline.fireChannelInactive()
        rig.advance(49)
        #expect(rig.client.isActive)
        rig.advance(1)
        #expect(!rig.client.isActive, "the client sees the server's FIN, one way later")
    }

    @Test func aClientTricklingARequestHeadIsLetGoAfterAMinute() throws {
        let rig = try self.makeRig()
        try rig.client.writeInbound(ByteBuffer(string: "GET http://origin.netcond.test/file HTTP/1.1\r\n"))
        for _ in 0..<59 {
            rig.advance(1000)
            try rig.client.writeInbound(ByteBuffer(string: "X-Slow: 1\r\n"))  // a byte now and then, never the end
        }
        #expect(rig.client.isActive)
        rig.advance(1050)
        #expect(!rig.client.isActive, "a minute after it began, the head is still not complete")
        #expect(rig.connectsAttempted == 0)
    }

    @Test func anIdleClientWithAServerBehindItWaitsForTheServersTimeOutNotNetconds() throws {
        let rig = try self.makeRig()
        try rig.request("GET", "/file")
        rig.advance(150)
        try rig.respond("ok")
        rig.advance(50)
        rig.advance(120_000)
        #expect(rig.client.isActive, "the server keeps the connection: so does netcond")
        // The same client after the server has gone: its next request has a minute to come.
        rig.upstreams[0].pipeline.fireChannelInactive()
        rig.advance(50)
        #expect(!rig.client.isActive, "the server's close reached the client")
    }

    @Test func aConnectionThatNeverSaysWhatItSpeaksIsLetGo() throws {
        let rig = try self.makeRig()
        rig.advance(59_999)
        #expect(rig.client.isActive)
        rig.advance(1)
        #expect(!rig.client.isActive)
        // One that did speak is not cut off by that time-out.
        let other = try self.makeRig()
        try other.request("GET", "/file")
        other.advance(61_000)
        #expect(other.client.isActive)
    }
}
