import Foundation
import NetcondTesting
import ResumingClient
import Testing

@Suite struct ResumeTests {
    /// 400 KB over LTE; the link is cut once 100 KB have reached the client. A downloader that
    /// resumes asks for the rest with Range and ends with every byte.
    @Test(.network(.lte)) func resumesAfterTheConnectionIsCut() async throws {
        let network = try #require(Netcond.current)
        let url = network.originURL.appendingPathComponent("bytes/400KB")
        let downloader = Downloader()
        async let downloaded = downloader.download(url)
        // Cut once 100 KB have been delivered (at most 30 s of waiting).
        for _ in 0..<300 {
            if let status = await network.status(), status.bytesDelivered >= 100_000 { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        await network.cut(.reset)
        let data = try await downloaded
        #expect(data.count == 409_600)  // 400 KB of 1,024 bytes
        let requests = network.originRequests.filter { $0.target == "/bytes/400KB" }
        #expect(requests.count >= 2, "the link was cut, so at least two requests: \(requests.count)")
        // The second asked for the rest, not the whole file again.
        let resumedAt = requests.dropFirst().first?.headers.range
        #expect(resumedAt?.hasPrefix("bytes=") == true && resumedAt != "bytes=0-", "\(String(describing: resumedAt))")
        print("ResumeTests: \(await network.summary())")
    }
}
