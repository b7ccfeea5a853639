import Testing

@testable import NetcondCore

/// The access link and the routes' links in series: events in time order across many routes (ties
/// to the lower route), a stalled route holding only its units.
@Suite struct LinkNetworkOrderTests {
    static func route(_ index: Int, latency: Int) throws -> Route {
        let profile = try ProfileDecoder().decode(
            yaml: "name: r\(index)\nlink: {latency: \(latency)ms}", file: "Profiles/r\(index).yaml")
        return Route(
            name: "r\(index)", match: RouteMatch(addresses: [AddressBlock("10.0.0.\(index)/32")!]), profile: profile)
    }

    static func access(_ yaml: String = "link: {latency: 10ms}") throws -> ConditionTimeline {
        ConditionTimeline(
            profile: try ProfileDecoder().decode(yaml: "name: a\n" + yaml, file: "Profiles/a.yaml"), seed: 1)
    }

    /// Every event by `at`: unit → delivered at (ms), or -1 when dropped.
    static func drain(_ network: inout LinkNetwork<Int, Int>, upTo at: Instant) -> [(Int, Int64)] {
        var events: [(Int, Int64)] = []
        while let event = network.popEvent(upTo: at) {
            switch event {
            case .delivered(_, let delivery): events.append((delivery.unit, delivery.at.nanoseconds / 1_000_000))
            case .dropped(_, let unit, _): events.append((unit, -1))
            }
        }
        return events
    }

    @Test func eventsComeInTimeOrderAcrossManyRoutesTiesToTheLowerRoute() throws {
        // Route i: 300 - 2⌊i/2⌋ ms: two by two, routes deliver at the same moment.
        let routes = try (0..<200).map { try Self.route($0, latency: 300 - ($0 / 2) * 2) }
        var network = LinkNetwork<Int, Int>(access: try Self.access(), routes: routes, seed: 1)
        for index in (0..<200).reversed() {
            let admission = network.offer(index, .up, route: index, bytes: 100, connection: nil, at: .zero)
            #expect(admission == .held)
        }
        let events = Self.drain(&network, upTo: .ms(1000))
        #expect(events.count == 200)
        let expected = (0..<200).sorted { a, b in
            let (ta, tb) = (300 - (a / 2) * 2, 300 - (b / 2) * 2)
            return ta < tb || (ta == tb && a < b)
        }
        #expect(events.map(\.0) == expected)
        #expect(events.allSatisfy { $0.1 == 10 + 300 - Int64($0.0 / 2) * 2 })
    }

    @Test func aStalledRouteHoldsOnlyItsUnitsUntilTheStallEnds() throws {
        let routes = try [Self.route(0, latency: 50), Self.route(1, latency: 50)]
        var network = LinkNetwork<Int, Int>(access: try Self.access(), routes: routes, seed: 1)
        network.setStall(.down, route: 0, at: .zero)
        _ = network.offer(0, .down, route: 0, bytes: 100, connection: nil, at: .zero)
        _ = network.offer(1, .down, route: 1, bytes: 100, connection: nil, at: .zero)
        #expect(Self.drain(&network, upTo: .ms(500)).map(\.0) == [1])
        #expect(network.nextDelivery == nil)
        network.setStall(nil, route: 0, at: .ms(500))
        let after = Self.drain(&network, upTo: .ms(2000))
        #expect(after.map(\.0) == [0] && after[0].1 >= 500)
    }
}
