import NIOCore
import NIOEmbedded
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondOrigin

/// `/files/{name}` and the scenario's origin faults, on an `EmbeddedChannel`: exact bytes cut, statuses by request
/// number, a request that is never answered.
@Suite("FilesEndpoint")
struct FilesEndpointTests {
    static let file = OriginFile(name: "big.bin", size: ByteCount(bytes: 10_000), seed: 7)

    func origin(_ faults: [HTTPFault]) throws -> EmbeddedOrigin {
        try EmbeddedOrigin(chunkSize: 1000, content: OriginContent(files: [Self.file], faults: faults))
    }

    @Test("a cut sends exactly N body bytes of the k-th response, then closes; a resumed range is whole")
    func cutAfter() throws {
        let origin = try self.origin([
            HTTPFault(
                file: "big.bin", action: .cut(after: ByteCount(bytes: 2500), end: .fin),
                select: FaultSelection(first: 1))
        ])
        try origin.channel.sendRequest(.GET, "/files/big.bin")
        let cut = try origin.channel.readResponse()
        #expect(cut.head?.status == .ok)
        #expect(cut.head?.headers.first(name: "content-length") == "10000")
        #expect(cut.body == DeterministicBytes(seed: 7).bytes(offset: 0, count: 2500))
        #expect(!cut.ended)
        #expect(!origin.channel.isActive)
        let entry = try #require(origin.log.entries.first)
        #expect(entry.bodyBytesSent == 2500 && !entry.completed && entry.isFinished)

        let again = try self.origin([
            HTTPFault(
                file: "big.bin", action: .cut(after: ByteCount(bytes: 2500), end: .fin),
                select: FaultSelection(requests: [2]))
        ])
        try again.channel.sendRequest(.GET, "/files/big.bin", headers: [("Range", "bytes=2500-")])
        let whole = try again.channel.readResponse()
        #expect(whole.head?.status == .partialContent)
        #expect(whole.body == DeterministicBytes(seed: 7).bytes(offset: 2500, count: 7500))
        #expect(whole.ended)
        // The second request is cut: 2,500 bytes of the range, counted from its start.
        try again.channel.sendRequest(.GET, "/files/big.bin", headers: [("Range", "bytes=5000-")])
        let second = try again.channel.readResponse()
        #expect(second.body == DeterministicBytes(seed: 7).bytes(offset: 5000, count: 2500))
        #expect(!second.ended)
    }

    @Test("status faults answer by request number with Retry-After; HEAD does not count")
    func statusByNumber() throws {
        let origin = try self.origin([
            HTTPFault(file: "big.bin", action: .status(503, retryAfter: .seconds(2)), select: FaultSelection(first: 2))
        ])
        try origin.channel.sendRequest(.HEAD, "/files/big.bin")
        #expect(try origin.channel.readResponse().head?.status == .ok)
        for _ in 0..<2 {
            try origin.channel.sendRequest(.GET, "/files/big.bin")
            let response = try origin.channel.readResponse()
            #expect(response.head?.status == .serviceUnavailable)
            #expect(response.head?.headers.first(name: "retry-after") == "2")
        }
        try origin.channel.sendRequest(.GET, "/files/big.bin")
        let ok = try origin.channel.readResponse()
        #expect(ok.head?.status == .ok && ok.body.count == 10_000)
        #expect(origin.log.entries.map(\.retryAfter) == [nil, "2", "2", nil])
    }

    @Test("a hang never answers and is logged unfinished until the client leaves")
    func hang() throws {
        let origin = try self.origin([HTTPFault(file: "big.bin", action: .hang)])
        try origin.channel.sendRequest(.GET, "/files/big.bin")
        origin.channel.embeddedEventLoop.advanceTime(by: .hours(1))
        #expect(try origin.channel.readResponse().head == nil)
        #expect(origin.log.entries.first?.isFinished == false)
        try origin.channel.close().wait()
        #expect(origin.log.entries.first?.isFinished == true && origin.log.entries.first?.status == nil)
    }

    @Test("unknown files are 404 naming the run's files")
    func unknown() throws {
        let origin = try self.origin([])
        try origin.channel.sendRequest(.GET, "/files/nope.bin")
        let response = try origin.channel.readResponse()
        #expect(response.head?.status == .notFound)
        #expect(String(decoding: response.body, as: UTF8.self).contains("files in this run: /files/big.bin"))
    }
}
