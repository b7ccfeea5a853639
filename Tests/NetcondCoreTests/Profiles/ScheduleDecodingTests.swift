import Foundation
import Testing

@testable import NetcondCore

/// `schedule:` and `stalls:` in profile files: resolution of phases and every error.
@Suite struct ScheduleDecodingTests {
    let errors = ProfileDecoderTests()

    @Test func subwayAlternatesLTEAndTunnels() throws {
        let subway = try #require(ProfileCatalog.builtin(named: "subway"))
        let lte = try #require(ProfileCatalog.builtin(named: "lte"))
        let schedule = try #require(subway.schedule)
        #expect(schedule.repeats)
        #expect(schedule.phases.map(\.label) == ["covered", "tunnel"])
        #expect(schedule.phases[0].duration == SpanRange(.seconds(60), .seconds(120)))
        #expect(schedule.phases[0].conditions == lte.conditions)
        #expect(schedule.phases[0].outage == nil)
        #expect(schedule.phases[1].duration == SpanRange(.seconds(20), .seconds(40)))
        #expect(schedule.phases[1].outage == .blackhole)
    }

    @Test func satelliteHandoverEveryFifteenSeconds() throws {
        let leo = try #require(ProfileCatalog.builtin(named: "satellite-leo"))
        let phases = try #require(leo.schedule).phases
        let cycle = phases.map(\.duration.lower).reduce(Span.zero, +)
        #expect(cycle == .seconds(15))
        #expect(phases[1].conditions.down.latency > leo.down.latency)
        #expect(phases[1].conditions.down.loss.meanRate > leo.down.loss.meanRate)
        // The handover only changes latency and loss: the rates stay.
        #expect(phases[1].conditions.down.bandwidth == leo.down.bandwidth)
    }

    @Test func aPhaseUsesAnotherProfileWithOverrides() throws {
        let yaml = """
            extends: lte
            schedule:
              phases:
                - {name: platform, for: 30s, use: 3g, down: {loss: 2%}, dns_delay: 1s}
                - {for: 10s..20s, stall: down}
            """
        let profile = try ProfileDecoder().decode(yaml: yaml, file: "x.yaml")
        let threeG = try #require(ProfileCatalog.builtin(named: "3g"))
        let phases = try #require(profile.schedule).phases
        var expected = threeG.conditions
        expected.down.loss = .bernoulli(Probability(0.02))
        expected.dnsDelay = .seconds(1)
        #expect(phases[0].conditions == expected)
        #expect(phases[0].label == "platform")
        #expect(phases[1].conditions == profile.conditions)
        #expect(phases[1].stall == .down)
        #expect(phases[1].label == "phase")
        #expect(profile.schedule?.repeats == false)
    }

    @Test func phasesWithoutUseFollowTheFinalProfile() throws {
        let profile = try ProfileDecoder().decode(yaml: "extends: subway\ndown: {latency: 300ms}\n", file: "x.yaml")
        let phases = try #require(profile.schedule).phases
        #expect(phases[0].conditions.down.latency == .milliseconds(300))
    }

    @Test func stallsDecode() throws {
        let profile = try ProfileDecoder().decode(
            yaml: "stalls: {every: 15s..25s, for: 4s, direction: up}\n", file: "x.yaml"
        )
        #expect(
            profile.stalls
                == StallSpec(
                    every: SpanRange(.seconds(15), .seconds(25)), duration: .init(exactly: .seconds(4)), direction: .up)
        )
        #expect(!profile.isPassThrough)
    }

    @Test func scheduledBuiltinsReadBack() throws {
        for name in ["subway", "train-wifi", "satellite-leo"] {
            let profile = try #require(ProfileCatalog.builtin(named: name))
            let back = try ProfileDecoder().decode(yaml: profile.yamlDescription, file: "\(name).yaml")
            #expect(back == profile, "\(name)")
        }
    }

    // MARK: - Errors

    @Test func stallsLongerThanTheirPeriod() {
        self.errors.expectError(
            "stalls:\n  every: 4s\n  for: 2s..5s\n", at: 2, 10, keyPath: "stalls.every",
            containing: ["every 4s is not longer than for 2s..5s", "allowed: every longer than the longest stall"]
        )
    }

    @Test func unknownPhaseKeySuggests() {
        self.errors.expectError(
            "schedule:\n  phases:\n    - for: 1s\n      outgae: reset\n", at: 4, 7,
            keyPath: "schedule.phases[0].outgae",
            containing: ["did you mean 'outage'"]
        )
    }

    @Test func unknownOutageKind() {
        self.errors.expectError(
            "schedule:\n  phases:\n    - for: 1s\n      outage: drop\n", at: 4, 15,
            keyPath: "schedule.phases[0].outage",
            containing: ["blackhole, refuse, reset"]
        )
    }

    @Test func backwardsRange() {
        self.errors.expectError(
            "schedule:\n  phases:\n    - for: 40s..20s\n", at: 3, 12, keyPath: "schedule.phases[0].for",
            containing: ["runs backwards"]
        )
    }

    @Test func malformedRangeBound() {
        self.errors.expectError(
            "schedule:\n  phases:\n    - for: 40..60s\n", at: 3, 12, keyPath: "schedule.phases[0].for",
            containing: ["40", "in the range '40..60s'"]
        )
    }

    @Test func zeroLengthPhase() {
        self.errors.expectError(
            "schedule:\n  phases:\n    - for: 0\n", at: 3, 12, keyPath: "schedule.phases[0].for",
            containing: ["too short", "1ms…24h"]
        )
    }

    @Test func phaseWithoutDuration() {
        self.errors.expectError(
            "schedule:\n  phases:\n    - outage: reset\n", at: 3, 7, keyPath: "schedule.phases[0].for",
            containing: ["missing required key 'for'"]
        )
    }

    @Test func emptyPhases() {
        self.errors.expectError(
            "schedule:\n  phases: []\n", at: 2, 11, keyPath: "schedule.phases",
            containing: ["the list is empty"]
        )
    }

    @Test func unknownUseTarget() {
        self.errors.expectError(
            "schedule:\n  phases:\n    - {for: 1s, use: lt}\n", at: 3, 22, keyPath: "schedule.phases[0].use",
            containing: ["did you mean 'lte'"]
        )
    }

    @Test func aPhaseThatUsesItsOwnFileIsACycle() throws {
        let directory = try ProfileTestDirectory()
        try directory.write("loop.yaml", "schedule:\n  phases:\n    - {for: 1s, use: ./loop.yaml}\n")
        #expect {
            try ProfileDecoder().decodeFile(atPath: directory.path("loop.yaml"))
        } throws: { error in
            "\(error)".contains("use cycle: loop.yaml → loop.yaml")
        }
    }

    @Test func repeatMustBeABoolean() {
        self.errors.expectError(
            "schedule:\n  repeat: sometimes\n  phases: [{for: 1s}]\n", at: 2, 11, keyPath: "schedule.repeat",
            containing: ["true, false"]
        )
    }
}
