import Foundation
import NetcondTesting
import Testing

/// The trait as a user writes it: a conditioned network for one test, a client through it.
@Suite struct NetworkTraitTests {
    /// One HTTP/1.1 request on a new connection to `url`; returns the seconds from connect to the
    /// whole response, and the response.
    static func fetch(_ url: URL, path: String) throws -> (seconds: Double, response: String) {
        let started = Date()
        let port = UInt16(url.port ?? 80)
        let socket = try TCPClient(host: url.host ?? "127.0.0.1", port: port)
        defer { socket.close() }
        try socket.send("GET \(path) HTTP/1.1\r\nHost: \(url.host ?? "")\r\nConnection: close\r\n\r\n")
        let response = try socket.readToEnd()
        return (Date().timeIntervalSince(started), response)
    }

    @Test(.network(.edge)) func underEdgeARoundTripTakesAtLeastEdgesRoundTrip() throws {
        let network = try #require(Netcond.current)
        #expect(network.profileName == "edge")
        let (seconds, response) = try Self.fetch(network.originURL, path: "/bytes/1")
        #expect(response.hasPrefix("HTTP/1.1 200"))
        // A new connection's handshake and the request's round trip: 2 × 840 ms at least.
        #expect(seconds >= 0.840 * 2, "took \(seconds) s")
    }

    @Test(.network(.wifi)) func underWifiItDoesNot() throws {
        let network = try #require(Netcond.current)
        let (seconds, response) = try Self.fetch(network.originURL, path: "/bytes/1")
        #expect(response.hasPrefix("HTTP/1.1 200"))
        #expect(seconds < 0.840, "took \(seconds) s")
    }

    @Test func changesFromTheTestReachTheLink() async throws {
        let network = try await Netcond.start(profile: .none, seed: 7)
        do {
            try await self.changeAndRead(network)
        } catch {
            await network.stop()
            throw error
        }
        await network.stop()
    }

    func changeAndRead(_ network: ConditionedNetwork) async throws {
        #expect(network.seed == 7)
        await network.startOutage(.refuse)
        #expect(await network.status()?.outage == "refuse")
        let refused = try? Self.fetch(network.originURL, path: "/bytes/1")
        #expect(refused == nil || refused?.response.isEmpty == true)
        await network.endOutage()
        try await network.switchProfile(to: .threeG)
        #expect(await network.status()?.profile == "3g")
        let (_, response) = try Self.fetch(network.originURL, path: "/bytes/10")
        #expect(response.hasPrefix("HTTP/1.1 200"))
        #expect(network.originRequests.contains { $0.target == "/bytes/10" })
        await #expect(throws: (any Error).self) { try await network.switchProfile(to: .named("no-such-profile")) }
    }
}

/// A blocking TCP client, enough for a test's one request.
final class TCPClient {
    let fd: Int32

    init(host: String, port: UInt16) throws {
        self.fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            Glibc.close(self.fd)
            throw NetcondTestingTestError.connectFailed(errno)
        }
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard Glibc.send(self.fd, bytes, bytes.count, 0) == bytes.count else {
            throw NetcondTestingTestError.sendFailed(errno)
        }
    }

    /// What has been received so far (kept when the connection fails).
    private(set) var received: [UInt8] = []

    func readToEnd() throws -> String {
        String(decoding: try self.readBytesToEnd(), as: UTF8.self)
    }

    func readBytesToEnd() throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(self.fd, &buffer, buffer.count, 0)
            if n < 0 { throw NetcondTestingTestError.receiveFailed(errno) }
            if n == 0 { return self.received }
            self.received += buffer[0..<n]
        }
    }

    func close() {
        Glibc.close(self.fd)
    }
}

enum NetcondTestingTestError: Error {
    case connectFailed(Int32)
    case sendFailed(Int32)
    case receiveFailed(Int32)
}

/// A test must not pass for a reason that has nothing to do with its network: one whose client
/// never reached it fails, naming the likely cause.
@Suite struct SilentPassTests {
    @Test func aTestWhoseClientNeverReachedItsNetworkFails() async throws {
        let trait: NetworkTrait = .network(.none)
        let test = try #require(Test.current)
        try await withKnownIssue {
            try await trait.provideScope(for: test, testCase: nil) {
                // The client went elsewhere: nothing reaches the network.
            }
        } matching: { issue in
            issue.comments.contains {
                $0.rawValue.contains("nothing crossed the conditioned network") && $0.rawValue.contains("originURL")
            }
        }
    }

    @Test func aTestWhoseClientReachedItPassesAndOneThatMeansNoTrafficOnlyWarns() async throws {
        let test = try #require(Test.current)
        try await NetworkTrait.network(.none).provideScope(for: test, testCase: nil) {
            let network = try #require(Netcond.current)
            _ = try NetworkTraitTests.fetch(network.originURL, path: "/bytes/1")
        }
        try await NetworkTrait.network(.none, requiresTraffic: false).provideScope(for: test, testCase: nil) {}
    }

    @Test func onASuiteEachTestHasItsOwnNetworkUnlessShared() {
        #expect(NetworkTrait.network(.edge).isRecursive)
        #expect(!NetworkTrait.network(.edge, sharedBySuite: true).isRecursive)
    }
}

/// A suite under a network: each of its tests (run in parallel) sees only its own connections and
/// origin requests.
@Suite(.network(.none)) struct EachTestItsOwnNetworkTests {
    static func oneRequest() throws {
        let network = try #require(Netcond.current)
        #expect(network.originRequests.isEmpty)
        _ = try NetworkTraitTests.fetch(network.originURL, path: "/bytes/1")
        #expect(network.originRequests.count == 1)
    }

    @Test func first() throws { try Self.oneRequest() }
    @Test func second() throws { try Self.oneRequest() }
    @Test(arguments: 1...3) func eachCase(_ n: Int) throws { try Self.oneRequest() }
}
