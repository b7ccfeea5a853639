import Foundation
import NetcondTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The guards as a Swift developer meets them: a real URLSession client, not a raw socket.
enum URLSessionClient {
    /// GET `url` with a fresh ephemeral session; the body.
    static func get(_ url: URL) async throws -> Data {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: url)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw URLError(.badServerResponse)
        }
        return data
    }
}

/// On a suite, each test (each case of a parameterized one, run in parallel) has a network of its
/// own: the origin's log of one case holds that case's request alone.
@Suite(.network(.none)) struct URLSessionSuiteIsolationTests {
    @Test(arguments: [3, 5, 7, 11]) func eachCaseSeesOnlyItsOwnRequests(size: Int) async throws {
        let network = try #require(Netcond.current)
        let data = try await URLSessionClient.get(network.originURL.appendingPathComponent("bytes/\(size)"))
        #expect(data.count == size)
        #expect(network.originRequests.map(\.target) == ["/bytes/\(size)"], "\(network.originRequests.map(\.target))")
    }

    @Test func anotherTestOfTheSuiteHasAnotherNetwork() async throws {
        let network = try #require(Netcond.current)
        _ = try await URLSessionClient.get(network.originURL.appendingPathComponent("bytes/1"))
        #expect(network.originRequests.map(\.target) == ["/bytes/1"])
    }
}

/// A URLSession client sent somewhere else than its test's network: the test fails, naming why.
@Suite struct URLSessionSilentPassTests {
    @Test func aURLSessionClientThatMissedItsNetworkFailsTheTest() async throws {
        let test = try #require(Test.current)
        // Another network, standing in for any server the client reaches without crossing the
        // test's link (a URL written by hand, a client that ignores the proxy).
        let elsewhere = try await Netcond.start(profile: .none)
        let url = elsewhere.originURL.appendingPathComponent("bytes/10")
        do {
            try await withKnownIssue {
                try await NetworkTrait.network(.edge).provideScope(for: test, testCase: nil) {
                    let data = try await URLSessionClient.get(url)
                    #expect(data.count == 10)
                }
            } matching: { issue in
                issue.comments.contains { $0.rawValue.contains("nothing crossed the conditioned network") }
            }
        } catch {
            await elsewhere.stop()
            throw error
        }
        // The request happened, where the test's network could not see it.
        #expect(elsewhere.originRequests.map(\.target) == ["/bytes/10"])
        await elsewhere.stop()
    }

    @Test func aURLSessionClientThroughItsNetworkPasses() async throws {
        let test = try #require(Test.current)
        try await NetworkTrait.network(.none).provideScope(for: test, testCase: nil) {
            let network = try #require(Netcond.current)
            let data = try await URLSessionClient.get(network.originURL.appendingPathComponent("bytes/10"))
            #expect(data.count == 10)
        }
    }
}
