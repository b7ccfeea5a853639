import Testing

@testable import NetcondPacket

/// Responses as resolvers send them (compressed names, CNAME chains, IPv6) and as nobody should:
/// the parser reads what is there and never reads past the payload.
@Suite struct DNSAnswersTests {
    /// A name in wire form, uncompressed.
    static func name(_ text: String) -> [UInt8] {
        text.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }

    /// A record: `owner` (wire form), type, class IN, TTL 60, `data`.
    static func record(_ owner: [UInt8], type: UInt8, _ data: [UInt8]) -> [UInt8] {
        owner + [0, type, 0, 1, 0, 0, 0, 60, UInt8(data.count >> 8), UInt8(data.count & 0xff)] + data
    }

    /// A response to an A query for `question` with `answers` records.
    static func response(_ question: String, answers: [[UInt8]]) -> [UInt8] {
        [0x12, 0x34, 0x81, 0x80, 0, 1, 0, UInt8(answers.count), 0, 0, 0, 0] + Self.name(question) + [0, 1, 0, 1]
            + answers.flatMap { $0 }
    }

    @Test func anAnswerNamesTheQuestionAndItsAddress() throws {
        // The answer's owner points back at the question (offset 12), as resolvers write it.
        let payload = Self.response("CDN.netcond.test", answers: [Self.record([0xc0, 12], type: 1, [127, 110, 4, 9])])
        let answers = try #require(DNSAnswers.parse(payload))
        #expect(answers.question == "cdn.netcond.test")
        #expect(answers.mappings == [.init(name: "cdn.netcond.test", address: "127.110.4.9")])
    }

    @Test func everyNameOfACNAMEChainMapsToTheFinalAddresses() throws {
        let payload = Self.response(
            "www.example.test",
            answers: [
                Self.record([0xc0, 12], type: 5, Self.name("edge.example.test")),
                Self.record(Self.name("edge.example.test"), type: 5, Self.name("a.cdn.test")),
                Self.record(Self.name("a.cdn.test"), type: 1, [10, 0, 0, 1]),
                Self.record(
                    Self.name("a.cdn.test"), type: 28,
                    [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1]),
            ])
        let answers = try #require(DNSAnswers.parse(payload))
        let names = ["a.cdn.test", "www.example.test", "edge.example.test"]
        #expect(
            Set(answers.mappings)
                == Set(
                    names.map { DNSAnswers.Mapping(name: $0, address: "10.0.0.1") }
                        + names.map { DNSAnswers.Mapping(name: $0, address: "2001:db8::1") }))
        #expect(answers.mappings.first == .init(name: "a.cdn.test", address: "10.0.0.1"))
    }

    @Test func aCNAMELoopEndsAndMapsNothingToIt() throws {
        let payload = Self.response(
            "a.test",
            answers: [
                Self.record(Self.name("a.test"), type: 5, Self.name("b.test")),
                Self.record(Self.name("b.test"), type: 5, Self.name("a.test")),
                Self.record(Self.name("c.test"), type: 1, [1, 2, 3, 4]),
            ])
        #expect(DNSAnswers.parse(payload)?.mappings == [.init(name: "c.test", address: "1.2.3.4")])
    }

    @Test func aQueryOrAShortHeaderIsNoResponse() {
        var query = Self.response("a.test", answers: [])
        query[2] = 0x01
        #expect(DNSAnswers.parse(query) == nil)
        #expect(DNSAnswers.parse([0x12, 0x34, 0x81]) == nil)
        #expect(DNSAnswers.parse([]) == nil)
    }

    @Test func aPointerLoopInTheQuestionIsRefused() {
        // The question's name is a pointer to itself.
        let payload: [UInt8] = [0, 0, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1]
        #expect(DNSAnswers.parse(payload) == nil)
    }

    @Test func aRecordCutShortEndsTheReadingAndKeepsWhatCameBefore() throws {
        let whole = Self.response(
            "a.test",
            answers: [
                Self.record([0xc0, 12], type: 1, [1, 2, 3, 4]), Self.record([0xc0, 12], type: 1, [5, 6, 7, 8]),
            ])
        for cut in 0..<whole.count {
            // Every prefix reads without trapping; once the first answer is whole, it is there.
            let answers = DNSAnswers.parse(Array(whole.prefix(cut)))
            if cut >= whole.count - 14 {
                #expect(answers?.mappings.first == .init(name: "a.test", address: "1.2.3.4"))
            }
        }
        // An A record whose data is not 4 bytes long gives no address.
        let odd = Self.response("a.test", answers: [Self.record([0xc0, 12], type: 1, [1, 2, 3])])
        #expect(DNSAnswers.parse(odd)?.mappings == [])
    }

    @Test func everyByteFlippedStillReads() {
        let whole = Self.response(
            "www.example.test",
            answers: [
                Self.record([0xc0, 12], type: 5, Self.name("edge.example.test")),
                Self.record([0xc0, 34], type: 1, [10, 0, 0, 1]),
            ])
        for index in whole.indices {
            for value: UInt8 in [0, 0x3f, 0xc0, 0xff] {
                var bytes = whole
                bytes[index] = value
                _ = DNSAnswers.parse(bytes)
            }
        }
    }
}
