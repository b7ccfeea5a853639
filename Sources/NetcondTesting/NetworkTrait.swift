#if canImport(Testing)
import Testing

/// `@Test(.network(.edge))`: the test runs with a conditioned network of its own
/// (``Netcond/current``), started before and stopped after it. On a suite, each test of the suite
/// (each case of a parameterized one) gets a network of its own, as Swift Testing runs them in
/// parallel; `sharedBySuite: true` gives the whole suite one network instead (its tests then see
/// each other's connections, timing and origin requests: run such a suite `.serialized`).
///
/// A test whose client never reached its network fails (`requiresTraffic: false`: a warning):
/// it ran under no conditions at all, and would pass for a reason that has nothing to do with them.
public struct NetworkTrait: TestTrait, SuiteTrait, TestScoping {
    public let profile: NetworkProfile
    public let seed: UInt64?
    public let sharedBySuite: Bool
    public let requiresTraffic: Bool
    /// The TLS library for HTTPS (``Netcond/start(profile:seed:tls:)``); nil: none.
    public let tls: (any TLSProvider)?

    /// On a suite, the trait reaches each of its tests, unless the suite shares one network.
    public var isRecursive: Bool { !self.sharedBySuite }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let network = try await Netcond.start(profile: self.profile, seed: self.seed, tls: self.tls)
        // The seed decides every loss and jitter draw: printed, so a failure can be repeated.
        print(
            "netcond: \(test.name) under \(network.profileName), seed \(network.seed) (NETCOND_SEED=\(network.seed) repeats it)"
        )
        do {
            try await Netcond.$current.withValue(network) { try await function() }
        } catch {
            await network.stop()
            throw error
        }
        if let problem = await network.nothingCrossed() {
            if self.requiresTraffic {
                Issue.record(Comment(rawValue: problem))
            } else {
                print("netcond: warning: \(test.name): \(problem)")
            }
        }
        await network.stop()
    }
}

extension Trait where Self == NetworkTrait {
    /// The test (or each test of the suite) runs under `profile`; ``Netcond/current`` is its network.
    /// - Parameters:
    ///   - sharedBySuite: on a suite, one network for all its tests instead of one each.
    ///   - requiresTraffic: `false` for a test that means to make no connection (it then only
    ///     warns when none was made).
    ///   - tls: `.nioSSL` (from the `NetcondTLS` product) for the origin's `https://` and a
    ///     captive portal's wrong certificate.
    public static func network(
        _ profile: NetworkProfile, seed: UInt64? = nil, sharedBySuite: Bool = false, requiresTraffic: Bool = true,
        tls: (any TLSProvider)? = nil
    ) -> Self {
        NetworkTrait(
            profile: profile, seed: seed, sharedBySuite: sharedBySuite, requiresTraffic: requiresTraffic, tls: tls)
    }
}
#endif
