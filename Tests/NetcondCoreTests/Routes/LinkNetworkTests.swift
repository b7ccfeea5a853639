import Testing

@testable import NetcondCore

/// The access link and a route's link in series: delays add up each way, a drop on the second
/// path comes back as an event when it happens, and a route's outage is its own.
@Suite struct LinkNetworkTests {
    static func network(route: LinkDirection, outage: OutageBehaviour? = nil) -> LinkNetwork<Int, Int> {
        let access = Profile(
            name: "access", up: LinkDirection(latency: .milliseconds(20)),
            down: LinkDirection(latency: .milliseconds(20)))
        let beyond = Route(
            name: "far", match: RouteMatch(hosts: ["far.test"]),
            profile: Profile(name: "far", up: route, down: route), outage: outage)
        return LinkNetwork(access: ConditionTimeline(profile: access, seed: 1), routes: [beyond], seed: 1)
    }

    static func drain(_ network: inout LinkNetwork<Int, Int>, until end: Instant) -> [NetworkEvent<Int>] {
        var events: [NetworkEvent<Int>] = []
        // A unit moving on to its second path is no event: the next one comes later.
        while let next = network.nextDelivery, next <= end {
            if let event = network.popEvent(upTo: next) { events.append(event) }
        }
        return events
    }

    @Test func delaysAddUpEachWayAndUnroutedUnitsMeetTheAccessLinkAlone() {
        var network = Self.network(route: LinkDirection(latency: .milliseconds(300)))
        #expect(network.offer(1, .up, route: 0, bytes: 100, connection: 1, at: .zero) == .held)
        _ = network.offer(2, .down, route: 0, bytes: 100, connection: 1, at: .zero)
        _ = network.offer(3, .up, route: nil, bytes: 100, connection: 2, at: .zero)
        var arrivals: [Int: Instant] = [:]
        for case .delivered(_, let delivery) in Self.drain(&network, until: Instant(nanoseconds: 2_000_000_000)) {
            arrivals[delivery.unit] = delivery.at
        }
        #expect(arrivals[1] == Instant(nanoseconds: 320_000_000))
        #expect(arrivals[2] == Instant(nanoseconds: 320_000_000))
        #expect(arrivals[3] == Instant(nanoseconds: 20_000_000))
        #expect(network.roundTrip(route: 0, from: .zero) == .milliseconds(640))
        // The route counts what its units carried to the end, each way; the unrouted unit is not its.
        let view = network.view(ofRoute: 0, at: Instant(nanoseconds: 2_000_000_000))
        #expect(view.delivered.up == 100 && view.delivered.down == 100)
    }

    @Test func aSecondPathDropIsAnEventWhenItHappens() {
        var network = Self.network(route: LinkDirection(latency: .milliseconds(5)), outage: .blackhole)
        // Up: the access link carries it, the route's blackhole drops it when it gets there.
        #expect(network.offer(1, .up, route: 0, bytes: 100, connection: 1, at: .zero) == .held)
        let events = Self.drain(&network, until: Instant(nanoseconds: 1_000_000_000))
        guard case .dropped(.up, 1, .outage)? = events.first else {
            Issue.record("expected the route's outage to drop it: \(events)")
            return
        }
        // Down: dropped at once, by the route's path, which it meets first.
        #expect(
            network.offer(2, .down, route: 0, bytes: 100, connection: 1, at: .zero + .milliseconds(30))
                == .dropped(.outage))
        // Unrouted units do not see the route's outage.
        _ = network.offer(3, .up, route: nil, bytes: 100, connection: 2, at: .zero + .milliseconds(30))
        #expect(Self.drain(&network, until: Instant(nanoseconds: 1_000_000_000)).count == 1)
        // What the route dropped it did not carry.
        let view = network.view(ofRoute: 0, at: Instant(nanoseconds: 1_000_000_000))
        #expect(view.delivered.up == 0 && view.delivered.down == 0)
    }

    @Test func aResetOutageOnARouteIsReportedOnce() {
        var network = Self.network(route: LinkDirection())
        let begins = network.setOutage(.reset, route: 0, at: .zero + .milliseconds(10))
        let again = network.setOutage(.reset, route: 0, at: .zero + .milliseconds(20))
        #expect(begins && !again)
        #expect(network.outage(route: 0) == .reset && network.outage(route: nil) == nil)
        let ends = network.setOutage(nil, route: 0, at: .zero + .milliseconds(30))
        #expect(!ends)
        #expect(network.outage(route: 0) == nil)
    }

    @Test func aSwitchKeepsARouteOfTheSameNameAndAddsNewOnes() {
        var network = Self.network(route: LinkDirection(latency: .milliseconds(300)))
        let faster = Route(
            name: "far", match: RouteMatch(hosts: ["far.test"]),
            profile: Profile(name: "far", up: LinkDirection(latency: .milliseconds(1))))
        let other = Route(name: "near", match: RouteMatch(hosts: ["near.test"]), profile: Profile(name: "near"))
        _ = network.replaceRoutes(with: [other, faster], at: .zero)
        #expect(network.route(for: RouteTarget(host: "far.test", port: 80)) == 0)
        #expect(network.route(for: RouteTarget(host: "near.test", port: 80)) == 1)
        #expect(network.route(0).conditions.up.latency == .milliseconds(1))
    }
}

/// A path fed by two sources (an engine's offers, units moving on from their first path) never
/// sees time go back: an offer earlier than the path's latest is taken at that latest moment.
@Suite struct LinkNetworkClockTests {
    @Test func anOfferEarlierThanAMovedUnitIsTakenAtTheMovedUnitsMoment() {
        var network = LinkNetworkTests.network(route: LinkDirection(latency: .milliseconds(10)))
        // Routed down: the route's path (10 ms), then the access link's down path from 10 ms.
        _ = network.offer(1, .down, route: 0, bytes: 100, connection: 1, at: .zero)
        #expect(network.popEvent(upTo: .zero + .milliseconds(12)) == nil)
        // An unrouted packet read late, stamped 9 ms: the access link's down path is at 10 ms.
        _ = network.offer(2, .down, route: nil, bytes: 100, connection: 2, at: .zero + .milliseconds(9))
        var arrivals: [Int: Instant] = [:]
        for case .delivered(_, let delivery) in LinkNetworkTests.drain(&network, until: .zero + .seconds(1)) {
            arrivals[delivery.unit] = delivery.at
        }
        #expect(arrivals[1] == .zero + .milliseconds(30))
        #expect(arrivals[2] == .zero + .milliseconds(30))
    }

    @Test func aRouteAddedByASwitchStartsItsScheduleThen() throws {
        var network = LinkNetworkTests.network(route: LinkDirection())
        let scheduled = try ProfileDecoder().decode(
            yaml:
                "routes: [{name: new, match: {host: new.test}, schedule: {phases: [{for: 10s}, {for: 10s, outage: refuse}]}}]",
            file: "p.yaml")
        _ = network.replaceRoutes(with: scheduled.routes, at: .zero + .seconds(60))
        let path = network.route(named: "new")!
        #expect(network.outage(route: path) == nil)
        #expect(network.nextRouteChange == .zero + .seconds(70))
    }
}
