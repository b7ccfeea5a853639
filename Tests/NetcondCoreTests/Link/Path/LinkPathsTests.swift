import Testing

@testable import NetcondCore

/// Both directions of the link following the timeline: its phases reconfigure the paths, its
/// outage gates them, its stalls stop each direction's queue, at their moments.
@Suite struct LinkPathsTests {
    static func timeline(_ yaml: String) throws -> ConditionTimeline {
        ConditionTimeline(
            profile: try ProfileDecoder().decode(yaml: "name: t\n" + yaml, file: "Profiles/t.yaml"), seed: 1)
    }

    static func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

    @Test func phasesOutagesAndStallsReachThePathsAtTheirMoments() throws {
        var timeline = try Self.timeline(
            """
            link: {latency: 10ms}
            schedule:
              repeat: false
              phases:
                - {name: slow, for: 1s, link: {latency: 100ms}}
                - {name: dark, for: 1s, outage: blackhole}
                - {name: stuck, for: 1s, stall: up}
                - {name: fast, for: 1s}
            """)
        var paths = LinkPaths<Int, Int>(timeline, seed: 1)
        #expect(paths.conditions.down.latency == .milliseconds(100) && paths.outage == nil && paths.stalled.isEmpty)
        #expect(
            paths[.down].offer(1, bytes: 100, connection: nil, at: Self.ms(500))
                == .delivers(at: Self.ms(600), corruptByte: nil, duplicated: false))
        timeline.advance(to: Self.ms(1000))
        paths.follow(timeline, at: Self.ms(1000))
        #expect(paths.outage == .blackhole)
        #expect(paths[.up].offer(2, bytes: 100, connection: nil, at: Self.ms(1500)) == .dropped(.outage))
        timeline.advance(to: Self.ms(2000))
        paths.follow(timeline, at: Self.ms(2000))
        #expect(paths.outage == nil && paths.stalled == [.up])
        #expect(paths[.up].offer(3, bytes: 100, connection: nil, at: Self.ms(2500)) == .held)
        #expect(
            paths[.down].offer(4, bytes: 100, connection: nil, at: Self.ms(2500))
                == .delivers(at: Self.ms(2510), corruptByte: nil, duplicated: false))
        timeline.advance(to: Self.ms(3000))
        paths.follow(timeline, at: Self.ms(3000))
        #expect(paths.stalled.isEmpty)
        // In time order across both directions: the first offer, the down one, then the held one
        // (sent when the stall ended, a latency later).
        var order: [(Direction, Int, Instant)] = []
        while let (direction, delivery) = paths.popDelivery(upTo: Self.ms(5000)) {
            order.append((direction, delivery.unit, delivery.at))
        }
        #expect(order.map(\.1) == [1, 4, 3])
        #expect(order.map(\.2) == [Self.ms(600), Self.ms(2510), Self.ms(3010)])
        #expect(order.map(\.0) == [.down, .down, .up])
    }
}
