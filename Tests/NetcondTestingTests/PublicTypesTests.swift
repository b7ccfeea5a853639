import Foundation
import NetcondTesting
import Testing

/// Every type a test touches can be named with `import NetcondTesting` alone (this file imports
/// no other netcond module), and a network's values come back typed.
@Suite struct PublicTypesTests {
    @Test(.network(.none)) func theTypesOfANetworkAreNamedFromNetcondTesting() async throws {
        let network: ConditionedNetwork = try #require(Netcond.current)
        _ = try NetworkTraitTests.fetch(network.originURL, path: "/bytes/1")
        let requests: [OriginRequest] = network.originRequests
        #expect(requests.count == 1)
        let status: NetworkStatus? = await network.status()
        #expect(status?.connectionsTotal == 1)
        let events: [NetworkEvent] = await network.events()
        _ = events
        let changes: (OutageBehaviour, StallDirection, CutMode) = (.refuse, .down, .close)
        _ = changes
        let profile: Profile = try NetworkProfile.edge.resolve()
        #expect(profile.name == "edge")
        let kinds: [Any.Type] = [
            ScenarioReport.self, ScenarioCheck.self, ScenarioClientContext.self, NetworkTrait.self,
        ]
        #expect(kinds.count == 4)
    }
}
