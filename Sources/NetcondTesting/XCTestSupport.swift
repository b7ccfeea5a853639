#if canImport(XCTest)
import XCTest

extension XCTestCase {
    /// Runs `body` with a conditioned network of its own (also ``Netcond/current`` inside it),
    /// stopped afterwards whatever happens.
    /// A body whose client never reached the network fails the test (`requiresTraffic: false`:
    /// a warning): it ran under no conditions at all.
    public func withConditionedNetwork<T: Sendable>(
        _ profile: NetworkProfile, seed: UInt64? = nil, requiresTraffic: Bool = true, tls: (any TLSProvider)? = nil,
        _ body: (ConditionedNetwork) async throws -> T
    ) async throws -> T {
        let network = try await Netcond.start(profile: profile, seed: seed, tls: tls)
        print(
            "netcond: \(self.name) under \(network.profileName), seed \(network.seed) (NETCOND_SEED=\(network.seed) repeats it)"
        )
        do {
            let result = try await Netcond.$current.withValue(network) { try await body(network) }
            if let problem = await network.nothingCrossed() {
                if requiresTraffic { XCTFail(problem) } else { print("netcond: warning: \(self.name): \(problem)") }
            }
            await network.stop()
            return result
        } catch {
            await network.stop()
            throw error
        }
    }
}
#endif
