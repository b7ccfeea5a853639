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
            let status = await network.status()
            XCTAssertEqual(status?.profile, "3g")
            return network.originURL
        }
        XCTAssertNil(Netcond.current)
        // Stopped afterwards: its forward no longer listens.
        XCTAssertThrowsError(try TCPClient(host: origin.host ?? "127.0.0.1", port: UInt16(origin.port ?? 0)))
    }
}
