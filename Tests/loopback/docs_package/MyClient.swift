// The `MyClient` Docs/netcond-testing.md's example tests: a plain getter, and a downloader that
// asks for the rest with Range after a drop (test_docs_swift.py builds it with the example, beside
// Examples/ResumingClient's Downloader.swift).
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

public struct Client: Sendable {
    public struct Failed: Error {
        public var status: Int
    }

    public func get(_ url: URL) async throws -> Data {
        let (data, response) = try await URLSession(configuration: .ephemeral).data(from: url)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else { throw Failed(status: status) }
        return data
    }
}

public let myClient = Client()

public struct MyDownloader: Sendable {
    public init() {}

    /// Keeps what arrived and asks for the rest (`Range: bytes=N-`) after a drop: the example
    /// package's `Downloader` (Examples/ResumingClient), copied beside this file by the test.
    public func download(_ url: URL, to path: String) async throws {
        let data = try await Downloader().download(url)
        try data.write(to: URL(fileURLWithPath: path))
    }
}
