#if canImport(Testing)
import Testing

/// `@Test(.network(.edge))`: the test runs with a conditioned network of its own
/// (``Netcond/current``), started before and stopped after it. On a suite, one network serves
/// every test of the suite.
public struct NetworkTrait: TestTrait, SuiteTrait, TestScoping {
    public let profile: NetworkProfile
    public let seed: UInt64?

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let network = try await Netcond.start(profile: self.profile, seed: self.seed)
        // The seed decides every loss and jitter draw: printed, so a failure can be repeated.
        print("netcond: \(test.name) under \(network.profileName), seed \(network.seed) (NETCOND_SEED=\(network.seed) repeats it)")
        do {
            try await Netcond.$current.withValue(network) { try await function() }
        } catch {
            await network.stop()
            throw error
        }
        await network.stop()
    }
}

extension Trait where Self == NetworkTrait {
    /// The test (or suite) runs under `profile`; ``Netcond/current`` is its network.
    public static func network(_ profile: NetworkProfile, seed: UInt64? = nil) -> Self {
        NetworkTrait(profile: profile, seed: seed)
    }
}
#endif
