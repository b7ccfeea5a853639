import Testing

@testable import NetcondOrigin

@Suite("Range and entity tags")
struct ConditionalRequestTests {
    @Test(
        "Range header forms",
        arguments: [
            ("bytes=0-99", .closed(first: 0, last: 99)), ("bytes=100-", .from(first: 100)),
            ("bytes=-50", .suffix(length: 50)), (" Bytes = 5 - 9 ", .closed(first: 5, last: 9)),
            ("bytes=0-1,5-9", .multiple), ("bytes=0-1, -3", .multiple), ("items=0-9", .ignored),
            ("bytes=9-3", .ignored), ("bytes=abc", .ignored), ("bytes=", .ignored), ("bytes=-", .ignored),
            ("bytes=0-1,junk", .ignored), ("bytes=1-2-3", .ignored), ("garbage", .ignored),
        ] as [(String, ByteRangeRequest)]
    )
    func parsing(header: String, expected: ByteRangeRequest) {
        #expect(ByteRangeRequest(header: header) == expected)
    }

    @Test("resolution against a size")
    func resolution() {
        #expect(ByteRangeRequest.closed(first: 0, last: 99).resolve(size: 1000) == .partial(0..<100))
        #expect(ByteRangeRequest.closed(first: 900, last: 5000).resolve(size: 1000) == .partial(900..<1000))
        #expect(ByteRangeRequest.closed(first: 1000, last: 1000).resolve(size: 1000) == .unsatisfiable)
        #expect(ByteRangeRequest.from(first: 999).resolve(size: 1000) == .partial(999..<1000))
        #expect(ByteRangeRequest.from(first: 1000).resolve(size: 1000) == .unsatisfiable)
        #expect(ByteRangeRequest.suffix(length: 10).resolve(size: 1000) == .partial(990..<1000))
        #expect(ByteRangeRequest.suffix(length: 5000).resolve(size: 1000) == .partial(0..<1000))
        #expect(ByteRangeRequest.suffix(length: 0).resolve(size: 1000) == .unsatisfiable)
        #expect(ByteRangeRequest.suffix(length: 5).resolve(size: 0) == .unsatisfiable)
        #expect(ByteRangeRequest.from(first: 0).resolve(size: 0) == .unsatisfiable)
        #expect(ByteRangeRequest.multiple.resolve(size: 1000) == .full)
        #expect(ByteRangeRequest.ignored.resolve(size: 1000) == .full)
    }

    @Test("If-None-Match uses weak comparison and accepts * and lists")
    func ifNoneMatch() {
        let current = EntityTag(opaque: "1024-0")
        #expect(EntityTag.ifNoneMatch("\"1024-0\"", matches: current))
        #expect(EntityTag.ifNoneMatch("W/\"1024-0\"", matches: current))
        #expect(EntityTag.ifNoneMatch(" * ", matches: current))
        #expect(EntityTag.ifNoneMatch("\"a\", W/\"b\",\"1024-0\"", matches: current))
        #expect(!EntityTag.ifNoneMatch("\"1024-1\"", matches: current))
        #expect(!EntityTag.ifNoneMatch("1024-0", matches: current))
        #expect(!EntityTag.ifNoneMatch("", matches: current))
        #expect(!EntityTag.ifNoneMatch("\"unterminated", matches: current))
    }

    @Test("strong comparison rejects weak tags")
    func strongComparison() {
        let current = EntityTag(opaque: "1024-0")
        #expect(EntityTag(parsing: "\"1024-0\"")?.strongMatches(current) == true)
        #expect(EntityTag(parsing: "W/\"1024-0\"")?.strongMatches(current) == false)
        #expect(EntityTag(parsing: "\"1024-0\" junk") == nil)
        #expect(current.headerValue == "\"1024-0\"")
    }
}
