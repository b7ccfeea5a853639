import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondOrigin

/// `/api/{name}`: JSON answers, POST side effects with `Idempotency-Key`, and a dropped response
/// whose work was done.
@Suite("APIEndpoint")
struct APIEndpointTests {
    static let content = OriginContent(
        api: [OriginAPI(name: "orders", method: .post), OriginAPI(name: "profile", json: "{\"name\": \"Ada\"}")],
        faults: [HTTPFault(api: "orders", method: "POST", action: .dropResponse, select: FaultSelection(requests: [2]))]
    )

    func origin() throws -> EmbeddedOrigin {
        try EmbeddedOrigin(content: Self.content)
    }

    @Test("a GET endpoint answers its JSON; a POST endpoint says how many it created")
    func getJSON() throws {
        let origin = try self.origin()
        try origin.channel.sendRequest(.GET, "/api/profile")
        let profile = try origin.channel.readResponse()
        #expect(profile.head?.status == .ok)
        #expect(profile.head?.headers.first(name: "content-type") == "application/json")
        #expect(String(decoding: profile.body, as: UTF8.self) == "{\"name\": \"Ada\"}\n")
        try origin.channel.sendRequest(.POST, "/api/profile", body: "{}")
        #expect(try origin.channel.readResponse().head?.status == .methodNotAllowed)
        try origin.channel.sendRequest(.GET, "/api/nothing")
        #expect(try origin.channel.readResponse().head?.status == .notFound)
    }

    @Test("each POST creates; a repeated Idempotency-Key replays; a dropped response still created")
    func postEffects() throws {
        let origin = try self.origin()
        try origin.channel.sendRequest(
            .POST, "/api/orders", headers: [("Idempotency-Key", "k1")], body: "{\"item\": 1}")
        let first = try origin.channel.readResponse()
        #expect(first.head?.status == .created)
        #expect(String(decoding: first.body, as: UTF8.self) == "{\"id\": 1}\n")
        // Call 2 is dropped after the work: nothing comes back and the connection closes.
        try origin.channel.sendRequest(.POST, "/api/orders", body: "{\"item\": 2}")
        #expect(try origin.channel.readResponse().head == nil)
        #expect(!origin.channel.isActive)
        let entries = origin.log.entries
        #expect(entries.map(\.effect) == [.created(1), .created(2)])
        #expect(entries[1].status == nil && entries[1].isFinished && !entries[1].completed)

        let again = try self.origin()
        try again.channel.sendRequest(.POST, "/api/orders", headers: [("Idempotency-Key", "k1")], body: "{}")
        _ = try again.channel.readResponse()
        try again.channel.sendRequest(.GET, "/api/orders")
        #expect(
            String(decoding: try again.channel.readResponse().body, as: UTF8.self)
                == "{\"endpoint\": \"orders\", \"created\": 1}\n")
    }

    @Test("faults apply to a GET endpoint's calls by number; HEAD does not count")
    func getFaults() throws {
        let content = OriginContent(
            api: [OriginAPI(name: "feed")],
            faults: [
                HTTPFault(
                    api: "feed", method: "GET", action: .status(503, retryAfter: .seconds(1)),
                    select: FaultSelection(first: 1))
            ])
        let origin = try EmbeddedOrigin(content: content)
        try origin.channel.sendRequest(.HEAD, "/api/feed")
        #expect(try origin.channel.readResponse().head?.status == .ok)
        try origin.channel.sendRequest(.GET, "/api/feed")
        let first = try origin.channel.readResponse()
        #expect(first.head?.status == .serviceUnavailable)
        #expect(first.head?.headers.first(name: "retry-after") == "1")
        try origin.channel.sendRequest(.GET, "/api/feed")
        #expect(try origin.channel.readResponse().head?.status == .ok)
    }

    @Test("the same key again answers the first object with Idempotent-Replayed and creates nothing")
    func replay() throws {
        let content = OriginContent(api: [OriginAPI(name: "orders", method: .post)])
        let origin = try EmbeddedOrigin(content: content)
        try origin.channel.sendRequest(.POST, "/api/orders", headers: [("Idempotency-Key", "same")], body: "{}")
        let first = try origin.channel.readResponse()
        try origin.channel.sendRequest(.POST, "/api/orders", headers: [("Idempotency-Key", "same")], body: "{}")
        let second = try origin.channel.readResponse()
        #expect(first.head?.status == .created)
        #expect(second.head?.status == .ok)
        #expect(second.head?.headers.first(name: "idempotent-replayed") == "true")
        #expect(String(decoding: second.body, as: UTF8.self) == "{\"id\": 1}\n")
        #expect(origin.log.entries.map(\.effect) == [.created(1), .replayed(1)])
    }
}
