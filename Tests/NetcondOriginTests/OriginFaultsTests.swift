import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondOrigin

/// The fault vocabulary carried out by the origin itself: every action, on any path it serves.
@Suite("OriginFaults")
struct OriginFaultsTests {
    static let file = OriginFile(name: "big.bin", size: ByteCount(bytes: 10_000), seed: 7)
    static let orders = OriginAPI(name: "orders", method: .post)

    func origin(_ faults: [HTTPFault]) throws -> EmbeddedOrigin {
        try EmbeddedOrigin(
            chunkSize: 1000, content: OriginContent(files: [Self.file], api: [Self.orders], faults: faults))
    }

    @Test("a status fault answers instead of the endpoint: a POST creates nothing")
    func statusDoesNoWork() throws {
        let origin = try self.origin([
            HTTPFault(
                api: "orders", method: "POST", action: .status(429, retryAfter: .seconds(3)),
                select: FaultSelection(first: 1))
        ])
        try origin.channel.sendRequest(.POST, "/api/orders", body: "{}")
        let refused = try origin.channel.readResponse()
        #expect(refused.head?.status == .tooManyRequests && refused.head?.headers.first(name: "retry-after") == "3")
        try origin.channel.sendRequest(.POST, "/api/orders", body: "{}")
        #expect(String(decoding: try origin.channel.readResponse().body, as: UTF8.self) == "{\"id\": 1}\n")
        #expect(origin.log.entries.map(\.effect) == [nil, .created(1)])
    }

    @Test("a cut with end: reset sends N body bytes, then resets; a JSON body is cut too")
    func cutWithReset() throws {
        let origin = try self.origin([
            HTTPFault(
                match: RequestMatch(path: "/bytes/*"), action: .cut(after: ByteCount(bytes: 1500), end: .reset),
                select: FaultSelection(requests: [1])),
            HTTPFault(api: "orders", method: "POST", action: .cut(after: ByteCount(bytes: 4), end: .fin)),
        ])
        try origin.channel.sendRequest(.GET, "/bytes/5000?seed=1")
        let cut = try origin.channel.readResponse()
        #expect(
            cut.head?.status == .ok && cut.body == DeterministicBytes(seed: 1).bytes(offset: 0, count: 1500)
                && !cut.ended)
        #expect(!origin.channel.isActive)

        let json = try self.origin([
            HTTPFault(api: "orders", method: "POST", action: .cut(after: ByteCount(bytes: 4), end: .fin))
        ])
        try json.channel.sendRequest(.POST, "/api/orders", body: "{}")
        let short = try json.channel.readResponse()
        #expect(String(decoding: short.body, as: UTF8.self) == "{\"id" && !short.ended && !json.channel.isActive)
        #expect(json.log.entries.first?.effect == .created(1) && json.log.entries.first?.completed == false)
    }

    @Test("the log names a fault that acted; a cut with nothing to cut (a short body, a HEAD) is not logged")
    func loggedWhenItActs() throws {
        let origin = try self.origin([
            HTTPFault(match: RequestMatch(path: "/bytes/*"), action: .cut(after: ByteCount(bytes: 100), end: .fin))
        ])
        try origin.channel.sendRequest(.HEAD, "/bytes/1000")
        _ = try origin.channel.readResponse()
        try origin.channel.sendRequest(.GET, "/bytes/50")
        #expect(try origin.channel.readResponse().body.count == 50)
        try origin.channel.sendRequest(.GET, "/bytes/1000")
        #expect(try origin.channel.readResponse().body.count == 100)
        #expect(origin.log.entries.map(\.fault) == [nil, nil, .cut(after: ByteCount(bytes: 100), end: .fin)])
    }

    @Test("a delay holds the answer exactly that long")
    func delay() throws {
        let origin = try self.origin([HTTPFault(file: "big.bin", action: .delay(.seconds(45)))])
        try origin.channel.sendRequest(.GET, "/files/big.bin")
        origin.channel.embeddedEventLoop.advanceTime(by: .milliseconds(44_999))
        #expect(try origin.channel.readResponse().head == nil)
        origin.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        let response = try origin.channel.readResponse()
        #expect(response.head?.status == .ok && response.body.count == 10_000)
    }

    @Test("a slow close sends the whole response with Connection: close, then closes that much later")
    func slowClose() throws {
        let origin = try self.origin([HTTPFault(file: "big.bin", action: .slowClose(.seconds(10)))])
        try origin.channel.sendRequest(.GET, "/files/big.bin")
        let response = try origin.channel.readResponse()
        #expect(response.ended && response.body.count == 10_000)
        #expect(response.head?.headers.first(name: "connection") == "close")
        origin.channel.embeddedEventLoop.advanceTime(by: .milliseconds(9_999))
        #expect(origin.channel.isActive)
        origin.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!origin.channel.isActive)
    }

    @Test("a hang on a standard endpoint never answers; a host or method that does not match is untouched")
    func matchByHostAndMethod() throws {
        let origin = try self.origin([
            HTTPFault(match: RequestMatch(host: "cdn.netcond.test", path: "/bytes/*", method: "GET"), action: .hang)
        ])
        try origin.channel.sendRequest(.GET, "/bytes/10", headers: [("Host", "origin.netcond.test")])
        #expect(try origin.channel.readResponse().head?.status == .ok)
        try origin.channel.sendRequest(.HEAD, "/bytes/10", headers: [("Host", "cdn.netcond.test:8080")])
        #expect(try origin.channel.readResponse().head?.status == .ok)
        try origin.channel.sendRequest(
            .GET, "http://cdn.netcond.test/bytes/10", headers: [("Host", "cdn.netcond.test")])
        origin.channel.embeddedEventLoop.advanceTime(by: .hours(1))
        #expect(try origin.channel.readResponse().head == nil && origin.channel.isActive)
    }

    @Test("hosts lose their port, bracketed addresses their brackets; absolute targets become paths")
    func requestParts() {
        #expect(OriginFaults.hostWithoutPort("origin.netcond.test:8080") == "origin.netcond.test")
        #expect(OriginFaults.hostWithoutPort("[::1]:80") == "::1")
        #expect(OriginFaults.originForm("http://a.test/x?y=1") == "/x?y=1")
        #expect(OriginFaults.originForm("http://a.test") == "/")
        #expect(OriginFaults.originForm("/files/a") == "/files/a")
        #expect(OriginFaults.originForm("http://a.test?x=1") == "/?x=1")
        #expect(OriginFaults.absoluteHost("http://user@CDN.netcond.test:8080/x") == "cdn.netcond.test")
        #expect(OriginFaults.absoluteHost("/x") == nil)
    }

    @Test("the log names the host each request asked for: the absolute target's, else Host's, without port")
    func loggedHost() throws {
        let origin = try self.origin([])
        try origin.channel.sendRequest(.GET, "/bytes/10", headers: [("Host", "CDN.netcond.test:8080")])
        _ = try origin.channel.readResponse()
        try origin.channel.sendRequest(.GET, "http://api.netcond.test/bytes/10", headers: [("Host", "x.test")])
        _ = try origin.channel.readResponse()
        try origin.channel.sendRequest(.GET, "/bytes/10", version: .http1_0)
        _ = try origin.channel.readResponse()
        #expect(origin.log.entries.map(\.host) == ["cdn.netcond.test", "api.netcond.test", nil])
    }
}
