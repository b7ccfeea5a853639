import Testing

@testable import NetcondCore

/// Firewall, connect hold and DNS failures, in virtual time, and their decoding.
@Suite struct SetupRulesTests {
    let errors = ProfileDecoderTests()

    func profile(_ setup: SetupRules) -> Profile {
        var profile = Profile.test(latency: .milliseconds(50))
        profile.dnsDelay = .milliseconds(200)
        profile.setup = setup
        return profile
    }

    @Test func aFirewallRefusesOtherPortsOneRoundTripLater() {
        var sim = LinkSimulation(self.profile(SetupRules(allowPorts: [80, 443])))
        let ok = sim.model.openFlow(at: .zero)
        sim.model.connect(ok, at: .zero, host: "10.0.0.1", port: 443, resolvesName: false)
        let blocked = sim.model.openFlow(at: .zero)
        sim.model.connect(blocked, at: .zero, host: "10.0.0.1", port: 5432, resolvesName: false)
        sim.run(until: .s(1))
        #expect(sim.notices.contains(.connected(ok, .established(at: .ms(100), synRetransmits: 0))))
        #expect(sim.notices.contains(.connected(blocked, .refusedByFirewall(at: .ms(100)))))
        #expect(sim.model.counters.setupFailures == 1)
    }

    @Test func aBlackholingFirewallTimesTheConnectionOut() {
        var sim = LinkSimulation(self.profile(SetupRules(allowPorts: [443], otherwise: .blackhole)))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.connect(flow, at: .zero, host: "db", port: 5432, resolvesName: true)
        sim.run(until: .s(200))
        // DNS 200 ms, then SYNs at 0.2, 1.2, 3.2 … s are dropped; the kernel gives up 127 s after the first.
        #expect(sim.notices.contains(.connected(flow, .timedOut(at: .ms(127_200)))))
    }

    @Test func theFirstConnectionsAreHeld() {
        var sim = LinkSimulation(self.profile(SetupRules(hold: .seconds(60), holdFirst: 2)))
        let outcomes = (0..<3).map { _ in
            let flow = sim.model.openFlow(at: .zero)
            sim.model.connect(flow, at: .zero, host: "a.example", port: 443, resolvesName: true)
            return flow
        }
        sim.run(until: .s(100))
        #expect(sim.notices.contains(.connected(outcomes[0], .established(at: .ms(60_300), synRetransmits: 0))))
        #expect(sim.notices.contains(.connected(outcomes[1], .established(at: .ms(60_300), synRetransmits: 0))))
        #expect(sim.notices.contains(.connected(outcomes[2], .established(at: .ms(300), synRetransmits: 0))))
    }

    @Test func listedNamesFailAfterTheDNSDelayButAddressesDoNot() {
        var sim = LinkSimulation(self.profile(SetupRules(dnsFail: ["*.tracker.example", "API.example.com"])))
        let named = sim.model.openFlow(at: .zero)
        #expect(
            sim.connect(named, at: .zero, host: "cdn.tracker.example", resolvesName: true)
                == .nameNotResolved(at: .ms(200)))
        let caseless = sim.model.openFlow(at: .s(1))
        #expect(
            sim.connect(caseless, at: .s(1), host: "api.EXAMPLE.com", resolvesName: true)
                == .nameNotResolved(at: .ms(1200)))
        let other = sim.model.openFlow(at: .s(2))
        #expect(
            sim.connect(other, at: .s(2), host: "www.example.com", resolvesName: true)
                == .established(at: .ms(2300), synRetransmits: 0))
    }

    @Test func decodedPrintedAndReadBack() throws {
        let yaml = """
            extends: 3g
            firewall: {allow_ports: [80, 443], otherwise: blackhole}
            connect_hold: 60s
            dns_fail: [api.example.com, "*.tracker.example"]
            """
        let profile = try ProfileDecoder().decode(yaml: yaml, file: "f.yaml")
        #expect(
            profile.setup
                == SetupRules(
                    allowPorts: [80, 443], otherwise: .blackhole, hold: .seconds(60), holdFirst: 1,
                    dnsFail: ["api.example.com", "*.tracker.example"]))
        #expect(!profile.isPassThrough)
        #expect(try ProfileDecoder().decode(yaml: profile.yamlDescription, file: "again.yaml") == profile)
        let hold = try ProfileDecoder().decode(yaml: "connect_hold: {for: 5s, first: 3}\n", file: "h.yaml")
        #expect(hold.setup.hold == .seconds(5) && hold.setup.holdFirst == 3 && !hold.isPassThrough)
    }

    @Test func badValues() {
        self.errors.expectError(
            "firewall: {allow_ports: [80, 70000]}\n", at: 1, 30, keyPath: "firewall.allow_ports[1]",
            containing: ["not a port", "1…65535"])
        self.errors.expectError(
            "firewall: {ports: [80]}\n", at: 1, 12, keyPath: "firewall.ports",
            containing: ["allow_ports"])
        self.errors.expectError(
            "firewall: {allow_ports: [80], otherwise: drop}\n", at: 1, 42, keyPath: "firewall.otherwise",
            containing: ["refuse, blackhole"])
        self.errors.expectError(
            "connect_hold: 0s\n", at: 1, 15, keyPath: "connect_hold", containing: ["above 0 up to 1h"])
        self.errors.expectError(
            "connect_hold: {for: 5s, first: 0}\n", at: 1, 32, keyPath: "connect_hold.first",
            containing: ["1 or more"])
        self.errors.expectError(
            "dns_fail: [\"http://x\"]\n", at: 1, 12, keyPath: "dns_fail[0]", containing: ["not a host name"])
    }
}
