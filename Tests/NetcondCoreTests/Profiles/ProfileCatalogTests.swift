import Foundation
import Testing

@testable import NetcondCore

/// The built-in profiles: they parse, carry their reference figures, read back from their YAML
/// form, and the compiled-in copy matches `Profiles/*.yaml`.
@Suite struct ProfileCatalogTests {
    static let expectedOrder = [
        "gprs", "edge", "3g", "hspa", "lte", "5g", "dsl", "cable", "wifi", "wifi-lossy",
        "satellite-geo", "satellite-leo", "subway", "train-wifi", "captive-hotel", "very-bad", "high-latency-dns",
        "offline",
    ]

    @Test func builtinsInCatalogOrder() {
        #expect(ProfileCatalog.builtinNames == Self.expectedOrder)
        #expect(ProfileCatalog.builtin.map(\.name) == Self.expectedOrder)
    }

    @Test func everyBuiltinSaysWhatItIsAndWhereTheNumbersComeFrom() {
        for profile in ProfileCatalog.builtin {
            #expect(!profile.description.isEmpty, "\(profile.name)")
            #expect(!profile.source.isEmpty, "\(profile.name)")
        }
    }

    /// (name, down, up, one-way latency down, up, loss down = up)
    @Test(arguments: [
        ("edge", "240kbit", "200kbit", "400ms", "440ms", "0%"),
        ("3g", "780kbit", "330kbit", "100ms", "100ms", "0%"),
        ("dsl", "2Mbit", "256kbit", "5ms", "5ms", "0%"),
        ("lte", "50Mbit", "10Mbit", "50ms", "65ms", "0%"),
        ("wifi", "40Mbit", "33Mbit", "1ms", "1ms", "0%"),
        ("very-bad", "1Mbit", "1Mbit", "500ms", "500ms", "10%"),
        ("satellite-geo", "19Mbit", "3Mbit", "340ms", "340ms", "0.1%"),
        ("satellite-leo", "100Mbit", "15Mbit", "20ms", "20ms", "0.1%"),
    ])
    func referenceFigures(
        name: String, down: String, up: String, downLatency: String, upLatency: String, loss: String
    ) throws {
        let profile = try #require(ProfileCatalog.builtin(named: name))
        #expect(profile.down.bandwidth == (try Bandwidth.parse(down)))
        #expect(profile.up.bandwidth == (try Bandwidth.parse(up)))
        #expect(profile.down.latency == (try Span.parse(downLatency)))
        #expect(profile.up.latency == (try Span.parse(upLatency)))
        let probability = try Probability.parse(loss)
        let expectedLoss = probability == .zero ? LossSpec.none : .bernoulli(probability)
        #expect(profile.down.loss == expectedLoss && profile.up.loss == expectedLoss)
    }

    @Test func geostationaryRoundTripIsInTheMeasuredRange() throws {
        let geo = try #require(ProfileCatalog.builtin(named: "satellite-geo"))
        #expect(geo.baseRTT >= .milliseconds(650) && geo.baseRTT <= .milliseconds(720))
        let leo = try #require(ProfileCatalog.builtin(named: "satellite-leo"))
        #expect(leo.baseRTT >= .milliseconds(30) && leo.baseRTT <= .milliseconds(45))
    }

    @Test func specialProfiles() throws {
        let offline = try #require(ProfileCatalog.builtin(named: "offline"))
        #expect(offline.down.loss == .bernoulli(.one) && offline.up.loss == .bernoulli(.one))
        let dns = try #require(ProfileCatalog.builtin(named: "high-latency-dns"))
        #expect(dns.dnsDelay == .milliseconds(1500))
        #expect(dns.down.bandwidth == ProfileCatalog.builtin(named: "cable")?.down.bandwidth)
        let lossy = try #require(ProfileCatalog.builtin(named: "wifi-lossy"))
        #expect(lossy.down.bandwidth == .mbit(40) && lossy.up.bandwidth == .mbit(33))
        guard case .gilbertElliott = lossy.down.loss else {
            Issue.record("wifi-lossy should lose in bursts, has \(lossy.down.loss)")
            return
        }
        #expect(lossy.down.loss.meanRate > 0.001 && lossy.down.loss.meanRate < 0.02)
    }

    @Test func queuesHoldAtLeastOneSegment() {
        for profile in ProfileCatalog.builtin {
            #expect(profile.up.queue >= profile.mss && profile.down.queue >= profile.mss, "\(profile.name)")
        }
    }

    @Test func everyBuiltinReadsBackFromItsYAMLDescription() throws {
        for profile in ProfileCatalog.builtin + [Profile.passThrough] {
            let yaml = profile.yamlDescription
            let decoded = try ProfileDecoder().decode(yaml: yaml, file: "\(profile.name).yaml")
            #expect(decoded == profile, "\(yaml)")
        }
    }

    // MARK: - Resolution

    @Test func resolvesNames() throws {
        #expect(try ProfileCatalog.resolve("edge").down.bandwidth == .kbit(240))
        #expect(try ProfileCatalog.resolve("none") == Profile.passThrough)
    }

    @Test func unknownNameSuggestsTheNearest() {
        #expect {
            try ProfileCatalog.resolve("edg")
        } throws: { error in
            (error as? ConfigError)?.description == "unknown profile 'edg'; did you mean 'edge'? built-in profiles: "
                + Self.expectedOrder.joined(separator: ", ") + ", none (or give a path to a .yaml file)"
        }
        #expect {
            try ProfileCatalog.resolve("LTE")
        } throws: { error in
            (error as? ConfigError)?.message.hasPrefix("unknown profile 'LTE'; did you mean 'lte'?") == true
        }
        #expect {
            try ProfileCatalog.resolve("zzzzzz")
        } throws: { error in
            (error as? ConfigError)?.message.hasPrefix("unknown profile 'zzzzzz'; built-in profiles: gprs,") == true
        }
    }

    @Test func resolvesPaths() throws {
        let directory = try ProfileTestDirectory()
        try directory.write("mine.yml", "extends: 3g\nup: {loss: 1%}\n")
        let profile = try ProfileCatalog.resolve(directory.path("mine.yml"))
        #expect(profile.name == "mine" && profile.up.loss == .bernoulli(Probability(0.01)))
        #expect(ProfileCatalog.looksLikePath("./edge") && ProfileCatalog.looksLikePath("edge.yaml"))
        #expect(!ProfileCatalog.looksLikePath("edge"))
        #expect {
            try ProfileCatalog.resolve("missing.yaml")
        } throws: { error in
            (error as? ConfigError)?.description == "missing.yaml: no such file: missing.yaml"
        }
    }

    // MARK: - Formatting

    @Test func summaryTable() throws {
        let edge = try #require(ProfileCatalog.builtin(named: "edge"))
        #expect(
            edge.summaryRow == [
                "edge", "240kbit", "200kbit", "400ms/440ms", "0%/0%", "2.5G EDGE: 240/200 kbit/s, 400/440 ms one way",
            ])
        let table = Profile.summaryTable([edge, Profile.passThrough])
        let lines = table.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("NAME  DOWN       UP         DELAY DOWN/UP  LOSS DOWN/UP  DESCRIPTION"))
        #expect(lines[2].hasPrefix("none  unlimited  unlimited  0ms/0ms        0%/0%         No conditions"))
        let lossy = try #require(ProfileCatalog.builtin(named: "wifi-lossy"))
        #expect(lossy.summaryRow[4].hasPrefix("~"))
    }

    @Test func yamlDescriptionOfEdge() throws {
        let edge = try #require(ProfileCatalog.builtin(named: "edge"))
        #expect(
            edge.yamlDescription == """
                name: "edge"
                description: "2.5G EDGE: 240/200 kbit/s, 400/440 ms one way"
                source: "Network Link Conditioner \\"Edge\\" preset (bandwidth and delays); queue chosen for cellular bufferbloat"
                tcp: cubic
                mss: 1460B
                dns_delay: 0ms
                connect_delay: 0ms
                down:
                  bandwidth: 240kbit
                  latency: 400ms
                  jitter: 0ms
                  queue: 64KB
                  loss: 0%
                  connection_bandwidth: unlimited
                up:
                  bandwidth: 200kbit
                  latency: 440ms
                  jitter: 0ms
                  queue: 64KB
                  loss: 0%
                  connection_bandwidth: unlimited

                """)
    }

    @Test func yamlDescriptionIsExactForOddValues() throws {
        let odd = Profile(
            // A name may not hold control characters (they could drive a terminal); a description may.
            name: "odd: \"quoted\" # not a comment",
            description: "tab\there\nand a second line",
            up: LinkDirection(
                latency: Span(nanoseconds: 1_234_567), bandwidth: Bandwidth(bitsPerSecond: 1_234_567),
                queue: ByteCount(bytes: 1_049_600), loss: .bernoulli(Probability(1.0 / 3.0))
            ),
            down: LinkDirection(loss: .bernoulli(Probability(0.000012345)))
        )
        #expect(try ProfileDecoder().decode(yaml: odd.yamlDescription, file: "x.yaml") == odd)
    }

    /// What `netcond ctl profile` sends is this text: a key it leaves out is a condition the live
    /// proxy silently drops (a queue in packets once came back as the default 64 KB).
    @Test func yamlDescriptionCarriesEveryDirectionKey() throws {
        let rich = Profile(
            name: "rich",
            up: LinkDirection(
                latency: .milliseconds(30), bandwidth: .mbit(5), queuePackets: 37,
                reorder: Probability(0.02), reorderGap: .milliseconds(7), duplicate: Probability(0.01),
                corrupt: Probability(0.005), aqm: .codel(target: .milliseconds(8), interval: .milliseconds(120))
            ),
            down: LinkDirection(
                bandwidth: .mbit(20), queuePackets: 1,
                aqm: .codel(target: .milliseconds(5), interval: .milliseconds(100)))
        )
        for inline in [false, true] {
            let yaml = rich.yaml(inlineTraces: inline)
            #expect(try ProfileDecoder().decode(yaml: yaml, file: "rich.yaml") == rich, "\(yaml)")
        }
        #expect(rich.yamlDescription.contains("queue: 37 packets"))
    }

    // MARK: - Generated file

    /// `BuiltinProfiles.generated.swift` must hold exactly `Profiles/*.yaml`; run
    /// `scripts/gen-builtin-profiles` when this fails.
    @Test func generatedFileMatchesProfilesDirectory() throws {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // Profiles
            .deletingLastPathComponent()  // NetcondCoreTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // repository root
        let directory = root.appendingPathComponent("Profiles")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".yaml") }
            .map { String($0.dropLast(".yaml".count)) }
            .sorted()
        let generated = BuiltinProfiles.all.map(\.name).sorted()
        let hint = "out of date: run scripts/gen-builtin-profiles"
        #expect(files == generated, "\(hint)")
        for (name, yaml) in BuiltinProfiles.all {
            let url = directory.appendingPathComponent("\(name).yaml")
            var text = (try? String(contentsOf: url, encoding: .utf8)) ?? "<missing>"
            if !text.hasSuffix("\n") { text += "\n" }
            #expect(text == yaml, "Profiles/\(name).yaml differs from the compiled-in copy; \(hint)")
            // A built-in's `name:` is its file name.
            #expect(ProfileCatalog.builtin(named: name)?.name == name)
        }
    }
}
