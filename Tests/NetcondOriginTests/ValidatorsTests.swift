import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondOrigin

/// Validators on the API and the files: an `ETag` and `Last-Modified` on every whole answer, and a
/// conditional GET that names the current one answered 304 (and logged as conditional).
@Suite("Validators")
struct ValidatorsTests {
    static let lastModified = "Mon, 01 Jan 2024 00:00:00 GMT"
    static let content = OriginContent(
        files: [OriginFile(name: "a.bin", size: ByteCount(bytes: 1000), seed: 3)],
        api: [OriginAPI(name: "feed", json: "{\"items\": []}"), OriginAPI(name: "orders", method: .post)])

    @Test("a GET endpoint's answer carries validators; If-None-Match or If-Modified-Since naming it gets 304")
    func apiRevalidates() throws {
        let origin = try EmbeddedOrigin(content: Self.content)
        try origin.channel.sendRequest(.GET, "/api/feed")
        let first = try origin.channel.readResponse()
        #expect(first.head?.status == .ok)
        let etag = try #require(first.head?.headers.first(name: "etag"))
        #expect(etag.hasPrefix("\"api-") && etag.count == 22, "\(etag)")
        #expect(first.head?.headers.first(name: "last-modified") == Self.lastModified)
        #expect(first.head?.headers.first(name: "cache-control") == "no-cache")
        try origin.channel.sendRequest(.GET, "/api/feed", headers: [("If-None-Match", etag)])
        let again = try origin.channel.readResponse()
        #expect(again.head?.status == .notModified)
        #expect(again.body.isEmpty)
        #expect(again.head?.headers.first(name: "etag") == etag)
        try origin.channel.sendRequest(.GET, "/api/feed", headers: [("If-Modified-Since", Self.lastModified)])
        #expect(try origin.channel.readResponse().head?.status == .notModified)
        // A validator that does not match, or a date before the change, gets the whole answer.
        try origin.channel.sendRequest(.GET, "/api/feed", headers: [("If-None-Match", "\"other\"")])
        #expect(try origin.channel.readResponse().head?.status == .ok)
        try origin.channel.sendRequest(
            .GET, "/api/feed", headers: [("If-Modified-Since", "Sun, 31 Dec 2023 23:59:59 GMT")])
        #expect(try origin.channel.readResponse().head?.status == .ok)
        // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
        try origin.channel.sendRequest(
            .GET, "/api/feed", headers: [("If-None-Match", "\"other\""), ("If-Modified-Since", Self.lastModified)])
        #expect(try origin.channel.readResponse().head?.status == .ok)
        // A date past the origin's clock is ignored: no claim that any copy is current.
        try origin.channel.sendRequest(
            .GET, "/api/feed", headers: [("If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")])
        #expect(try origin.channel.readResponse().head?.status == .ok)
        let entries = origin.log.entries
        #expect(entries.map(\.headers.isConditional) == [false, true, true, true, true, true, true])
        #expect(entries.map(\.status) == [200, 304, 304, 200, 200, 200, 200])
        #expect(entries[2].headers.ifModifiedSince == Self.lastModified)
    }

    @Test("the same JSON, the same tag; other JSON, another")
    func tagsFollowTheBytes() {
        #expect(APIEndpoint.etag(of: "{}\n") == APIEndpoint.etag(of: "{}\n"))
        #expect(APIEndpoint.etag(of: "{}\n") != APIEndpoint.etag(of: "{ }\n"))
    }

    @Test("a file answers If-Modified-Since too")
    func fileIfModifiedSince() throws {
        let origin = try EmbeddedOrigin(content: Self.content)
        try origin.channel.sendRequest(.GET, "/files/a.bin", headers: [("If-Modified-Since", Self.lastModified)])
        #expect(try origin.channel.readResponse().head?.status == .notModified)
        try origin.channel.sendRequest(.GET, "/files/a.bin", headers: [("If-Modified-Since", "yesterday")])
        #expect(try origin.channel.readResponse().head?.status == .ok)
    }

    @Test(
        "IMF-fixdate, and nothing else",
        arguments: [
            ("Mon, 01 Jan 2024 00:00:00 GMT", 1_704_067_200), ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),
            ("Thu, 01 Jan 1970 00:00:00 GMT", 0), ("Tue, 29 Feb 2028 12:00:00 GMT", 1_835_438_400),
            ("Sunday, 06-Nov-94 08:49:37 GMT", nil), ("Sun Nov  6 08:49:37 1994", nil),
            ("Mon, 01 Foo 2024 00:00:00 GMT", nil), ("Mon, 01 Jan 2024 25:00:00 GMT", nil),
            ("Mon, 01 Jan 2024 00:00:00 UTC", nil), ("", nil),
        ] as [(String, Int64?)])
    func httpDates(text: String, seconds: Int64?) {
        #expect(HTTPDate.seconds(text) == seconds)
    }
}
