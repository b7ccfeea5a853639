import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// Every HTTP fault applied by the proxy, in virtual time: the client and the upstream are
/// `EmbeddedChannel`s on one `EmbeddedEventLoop`, so the moment each byte and each close happens
/// is exact.
@Suite struct HTTPFaultTests {
    /// The proxy's rules with these faults, no emulated link.
    func makeRig(_ faults: [HTTPFault]) throws -> ProxyRig {
        try ProxyRig(profile: Profile(name: "t", faults: faults), shaped: false)
    }

    @Test func aStatusFaultAnswersWithoutTheServerAndKeepsTheConnection() throws {
        let rig = try self.makeRig([
            HTTPFault(action: .status(503, retryAfter: .seconds(5)), select: FaultSelection(first: 1))
        ])
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
        let rig = try self.makeRig([HTTPFault(action: .delay(.seconds(2)))])
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
        let rig = try self.makeRig([HTTPFault(action: .cut(after: ByteCount(bytes: 3), end: .fin))])
        try rig.request()
        try rig.respond("hello world")
        rig.loop.run()
        #expect(try rig.received().hasSuffix("Content-Length: 11\r\n\r\nhel"))
        #expect(!rig.client.isActive)
        #expect(!rig.upstreams[0].isActive)
    }

    @Test func resetAfterCutsTheBodyToo() throws {
        let rig = try self.makeRig([HTTPFault(action: .cut(after: ByteCount(bytes: 0), end: .reset))])
        try rig.request()
        try rig.respond("hello")
        rig.loop.run()
        #expect(try rig.received().hasSuffix("Content-Length: 5\r\n\r\n"))
        #expect(!rig.client.isActive)
        #expect(!rig.upstreams[0].isActive)
    }

    @Test func dropResponseLetsTheServerProcessItAndAnswersNothing() throws {
        let rig = try self.makeRig([HTTPFault(match: RequestMatch(method: "POST"), action: .dropResponse)])
        try rig.request("POST", "/orders")
        #expect(try rig.sentUpstream().hasPrefix("POST /orders HTTP/1.1\r\n"))
        try rig.respond("{\"order\": 1}")
        rig.loop.run()
        #expect(try rig.received().isEmpty)
        #expect(!rig.client.isActive)
        #expect(!rig.upstreams[0].isActive)
    }

    @Test func slowCloseClosesThatMuchAfterTheResponse() throws {
        let rig = try self.makeRig([HTTPFault(action: .slowClose(.seconds(1)))])
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
        let rig = try self.makeRig([
            HTTPFault(name: "flaky", action: .status(500, retryAfter: nil), select: FaultSelection(first: 1))
        ])
        rig.loop.advanceTime(by: .milliseconds(1500))
        try rig.request("GET", "/a?b=1")
        try rig.request("GET", "/a?b=2")
        let hits = rig.rules.events.filter { $0.kind == .fault }
        #expect(
            hits == [
                ProxyEvent(
                    at: 1.5, kind: .fault, detail: "fault 1 (flaky): GET http://origin.netcond.test/a?b=1", fault: 1,
                    method: "GET", host: "origin.netcond.test", path: "/a?b=1")
            ])
    }
}
