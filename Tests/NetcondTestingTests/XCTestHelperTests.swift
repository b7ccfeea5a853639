import Foundation
import NetcondTesting
import XCTest

/// The XCTest helper, as an XCTest suite uses it.
final class XCTestHelperTests: XCTestCase {
    func testWithConditionedNetworkRunsTheBodyUnderTheProfileAndStopsAfter() async throws {
        let origin = try await self.withConditionedNetwork(.threeG, seed: 3) { network in
            XCTAssertEqual(network.profileName, "3g")
            XCTAssertEqual(network.seed, 3)
            XCTAssertTrue(Netcond.current === network)
            let (_, response) = try NetworkTraitTests.fetch(network.originURL, path: "/bytes/1")
            XCTAssertTrue(response.hasPrefix("HTTP/1.1 200"))
            let status = await network.status()
            XCTAssertEqual(status?.profile, "3g")
            XCTAssertEqual(status?.connectionsTotal, 1)
            return network.originURL
        }
        XCTAssertNil(Netcond.current)
        // Stopped afterwards: its forward no longer listens.
        XCTAssertThrowsError(try TCPClient(host: origin.host ?? "127.0.0.1", port: UInt16(origin.port ?? 0)))
    }

    func testABodyThatMeansNoTrafficSaysSoAndPasses() async throws {
        // requiresTraffic: false: only a warning when nothing crossed (the default fails the test,
        // as the Swift Testing trait does: see SilentPassTests).
        try await self.withConditionedNetwork(.none, requiresTraffic: false) { network in
            XCTAssertEqual(network.profileName, "none")
        }
    }
}
