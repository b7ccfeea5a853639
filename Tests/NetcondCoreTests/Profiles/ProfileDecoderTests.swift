import Foundation
import Testing

@testable import NetcondCore

/// Decoding and validation of profile YAML: every error's position, key path and message.
@Suite struct ProfileDecoderTests {
    static let file = "Profiles/x.yaml"

    /// The error decoding `yaml` throws, or nil when it decodes.
    func decodeError(_ yaml: String, file: String = ProfileDecoderTests.file) -> ConfigError? {
        do {
            _ = try ProfileDecoder().decode(yaml: yaml, file: file)
            return nil
        } catch {
            return error
        }
    }

    func expectError(
        _ yaml: String,
        at line: Int,
        _ column: Int,
        keyPath: String,
        containing parts: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let error = self.decodeError(yaml) else {
            Issue.record("decoded without error", sourceLocation: sourceLocation)
            return
        }
        #expect(error.file == Self.file, sourceLocation: sourceLocation)
        #expect(error.line == line && error.column == column, "\(error)", sourceLocation: sourceLocation)
        #expect(error.keyPath == keyPath, "\(error)", sourceLocation: sourceLocation)
        for part in parts {
            #expect(error.message.contains(part), "\(error)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Every error at once

    @Test func everyWrongKeyIsReportedInFileOrderNotOnlyTheFirst() throws {
        let yaml = """
            tcp: reno
            down:
              loss: 150%
              lantecy: 10ms
            up:
              bandwidth: fast
            mss: 10B
            colour: blue
            """
        let error = try #require(self.decodeError(yaml))
        #expect(
            error.all.map { "\($0.line):\($0.column)" } == ["1:6", "3:9", "4:3", "6:14", "7:6", "8:1"], "\(error.all)")
        #expect(error.all.map(\.keyPath) == ["tcp", "down.loss", "down.lantecy", "up.bandwidth", "mss", "colour"])
        // The first is the one every other command shows; the others ride with it.
        #expect(error.line == 1 && error.alsoFound.count == 5)
    }

    @Test func theDescriptionListsTheOthersAsACompilerDoesUpToACap() throws {
        let yaml = (1...12).map { "key\($0): 1" }.joined(separator: "\n")
        let error = try #require(self.decodeError(yaml))
        let lines = error.description.split(separator: "\n").map(String.init)
        #expect(lines.count == 1 + ConfigError.shownWithFirst + 1, "\(lines)")
        #expect(lines[0].hasPrefix("Profiles/x.yaml:1:1: key1: unknown key 'key1'"))
        #expect(lines[9].hasPrefix("Profiles/x.yaml:10:1: key10: unknown key"))
        #expect(lines[10] == "Profiles/x.yaml: 2 more errors (netcond validate Profiles/x.yaml lists every one)")
        // One error alone is one line.
        #expect(try #require(self.decodeError("key1: 1")).description.split(separator: "\n").count == 1)
    }

    @Test func anErrorThatNeedsTwoKeysWaitsUntilEachIsRight() throws {
        // queue < mss is a cross-key check: with mss itself wrong, it is not claimed.
        let error = try #require(self.decodeError("mss: 10B\ndown:\n  queue: 100B\n"))
        #expect(error.all.count == 1 && error.keyPath == "mss", "\(error.all)")
        let second = try #require(self.decodeError("down:\n  queue: 100B\n"))
        #expect(second.all.count == 1 && second.keyPath == "down.queue", "\(second.all)")
    }

    // MARK: - The happy path

    @Test func decodesEveryKey() throws {
        let yaml = """
            name: edge-ish
            description: "An edge-like link"
            source: "made up"
            tcp: bbr
            mss: 1400B
            dns_delay: 200ms
            connect_delay: 2s
            down:
              bandwidth: 240kbit
              latency: 400ms
              jitter: 20ms
              queue: 32KB
              loss: 1%
              connection_bandwidth: 100kbit
            up:
              bandwidth: unlimited
              latency: 440ms
              loss: {model: gilbert-elliott, p: 1%, r: 25%, loss_in_bad: 80%, loss_in_good: 0.1%}
            """
        let profile = try ProfileDecoder().decode(yaml: yaml, file: Self.file)
        #expect(
            profile
                == Profile(
                    name: "edge-ish",
                    description: "An edge-like link",
                    source: "made up",
                    up: LinkDirection(
                        latency: .milliseconds(440),
                        loss: .gilbertElliott(
                            p: Probability(0.01), r: Probability(0.25),
                            lossInGood: Probability(0.001), lossInBad: Probability(0.8)
                        )
                    ),
                    down: LinkDirection(
                        latency: .milliseconds(400),
                        jitter: .milliseconds(20),
                        bandwidth: .kbit(240),
                        queue: ByteCount(bytes: 32 * 1024),
                        loss: .bernoulli(Probability(0.01)),
                        connectionBandwidth: .kbit(100)
                    ),
                    dnsDelay: .milliseconds(200),
                    connectDelay: .seconds(Int64(2)),
                    tcp: .bbr,
                    mss: ByteCount(bytes: 1400)
                ))
    }

    @Test func packetOnlyKeysDecodeAndAreNamedForTheStreamEngine() throws {
        let profile = try ProfileDecoder().decode(
            yaml: """
                name: p
                down:
                  queue: 50 packets
                  reorder: {probability: 5%, gap: 15ms}
                up:
                  reorder: 1%
                schedule:
                  phases:
                    - {for: 1s}
                    - {for: 1s, link: {queue: 64KB}}
                """, file: Self.file)
        #expect(profile.down.queuePackets == 50)
        #expect(profile.down.reorder == Probability(0.05) && profile.down.reorderGap == .milliseconds(15))
        #expect(profile.up.reorder == Probability(0.01) && profile.up.reorderGap == LinkDirection.defaultReorderGap)
        // A phase that sets queue in bytes replaces the packet count.
        #expect(profile.schedule?.phases[1].conditions.down.queuePackets == nil)
        #expect(profile.packetOnlyFeatures == ["reorder (up)", "reorder (down)"])
        #expect(profile.streamEngineRefusal?.contains("--engine packet") == true)
        #expect(profile.down.queueLimit == .packets(50))
        #expect(
            try ProfileDecoder().decode(yaml: "name: q\ndown: {queue: 64KB}", file: Self.file).streamEngineRefusal
                == nil)
    }

    @Test func duplicateCorruptAndCoDelDecodeForBothEngines() throws {
        let profile = try ProfileDecoder().decode(
            yaml: """
                name: p
                link:
                  bandwidth: 2Mbit
                  duplicate: 1%
                down:
                  corrupt: 0.1%
                  aqm: codel
                up:
                  aqm: {type: codel, target: 10ms, interval: 200ms}
                """, file: Self.file)
        #expect(profile.down.duplicate == Probability(0.01) && profile.up.duplicate == Probability(0.01))
        #expect(profile.down.corrupt == Probability(0.001) && profile.up.corrupt == .zero)
        #expect(profile.down.aqm == .codel(target: .milliseconds(5), interval: .milliseconds(100)))
        #expect(profile.up.aqm == .codel(target: .milliseconds(10), interval: .milliseconds(200)))
        // One link path: both engines carry them.
        #expect(profile.packetOnlyFeatures.isEmpty && profile.streamEngineRefusal == nil)
        let plain = try ProfileDecoder().decode(yaml: "name: q\ndown: {aqm: drop-tail}", file: Self.file)
        #expect(plain.down.aqm == .dropTail && plain.streamEngineRefusal == nil)
    }

    @Test func packetOnlyKeysRefuseBadValues() {
        self.expectError(
            "down:\n  queue: 0 packets", at: 2, 10, keyPath: "down.queue", containing: ["1…100000 packets"])
        self.expectError("down:\n  queue: lots packets", at: 2, 10, keyPath: "down.queue", containing: ["packets"])
        self.expectError(
            "down:\n  reorder: {probability: 1%, gap: 0ms}", at: 2, 35, keyPath: "down.reorder.gap",
            containing: ["1ms…10s"])
        self.expectError(
            "down:\n  reorder: {gap: 5ms}", at: 2, 12, keyPath: "down.reorder.probability", containing: ["missing"])
        self.expectError("down:\n  reorder: 120%", at: 2, 12, keyPath: "down.reorder", containing: ["%"])
        self.expectError("down:\n  duplicate: lots", at: 2, 14, keyPath: "down.duplicate", containing: ["%"])
        self.expectError("down:\n  corrupt: 101%", at: 2, 12, keyPath: "down.corrupt", containing: ["%"])
        self.expectError("down:\n  aqm: red", at: 2, 8, keyPath: "down.aqm", containing: ["drop-tail, codel"])
        self.expectError("down:\n  aqm: {type: pie}", at: 2, 15, keyPath: "down.aqm.type", containing: ["codel"])
        self.expectError(
            "down:\n  aqm: {type: codel, target: 0ms}", at: 2, 30, keyPath: "down.aqm.target", containing: ["5ms"])
        self.expectError(
            "down:\n  aqm: {type: codel, interval: 1ms}", at: 2, 32, keyPath: "down.aqm.interval",
            containing: ["above the target"])
        self.expectError(
            "down:\n  aqm: {type: codel, depth: 3}", at: 2, 22, keyPath: "down.aqm.depth", containing: ["depth"])
    }

    @Test func defaultsAndNameFromFile() throws {
        let profile = try ProfileDecoder().decode(yaml: "down: {latency: 100ms}\n", file: "some/dir/my-link.yaml")
        #expect(profile.name == "my-link")
        #expect(profile.description == "")
        #expect(profile.tcp == .cubic)
        #expect(profile.mss == ByteCount(bytes: 1460))
        #expect(profile.dnsDelay == .zero && profile.connectDelay == .zero)
        #expect(profile.down == LinkDirection(latency: .milliseconds(100)))
        #expect(profile.up == LinkDirection())
        #expect(profile.up.queue == ByteCount(bytes: 65_536))
        #expect(profile.down.bandwidth == nil && profile.down.loss == .none)
    }

    @Test func linkAppliesToBothDirectionsAndUpDownOverridePerKey() throws {
        let yaml = """
            link: {bandwidth: 1Mbit, latency: 10ms, loss: 1%}
            up: {latency: 20ms}
            down: {loss: 0%}
            """
        let profile = try ProfileDecoder().decode(yaml: yaml, file: Self.file)
        #expect(
            profile.up
                == LinkDirection(
                    latency: .milliseconds(20), bandwidth: .mbit(1), loss: .bernoulli(Probability(0.01))
                ))
        #expect(profile.down == LinkDirection(latency: .milliseconds(10), bandwidth: .mbit(1), loss: .none))
    }

    @Test func nullSectionsAreEmpty() throws {
        let profile = try ProfileDecoder().decode(yaml: "down:\nup: ~\n", file: Self.file)
        #expect(profile.down == LinkDirection() && profile.up == LinkDirection())
    }

    // MARK: - Validation errors, with position

    @Test func lossOver100Percent() {
        let yaml = "name: x\ndown:\n  loss: 150%\n"
        #expect(
            self.decodeError(yaml)?.description == """
                Profiles/x.yaml:3:9: down.loss: 150% is more than 100%; \
                allowed: a percentage 0%…100% (e.g. 1%) or a fraction 0…1 (e.g. 0.01)
                """)
    }

    @Test func unknownKeySuggestsTheNearest() {
        self.expectError(
            "down:\n  lantecy: 400ms\n", at: 2, 3, keyPath: "down.lantecy",
            containing: [
                "unknown key 'lantecy'; did you mean 'latency'? "
                    + "allowed keys: bandwidth, latency, jitter, queue, loss, connection_bandwidth"
            ]
        )
        self.expectError(
            "name: x\ndns-delay: 1s\n", at: 2, 1, keyPath: "dns-delay",
            containing: ["did you mean 'dns_delay'?", "allowed keys: name, description, source, extends, tcp"]
        )
        self.expectError(
            "zzz: 1\n", at: 1, 1, keyPath: "zzz",
            containing: ["unknown key 'zzz'; allowed keys: name, description"]
        )
    }

    @Test func directionKeyAtTopLevelSaysWhereItBelongs() {
        self.expectError(
            "latency: 100ms\n", at: 1, 1, keyPath: "latency",
            containing: ["unknown key 'latency'; 'latency' belongs under down:, up: or link: (both directions)"]
        )
    }

    @Test func wrongTypes() {
        self.expectError(
            "down: [1, 2]\n", at: 1, 7, keyPath: "down",
            containing: ["expected a mapping of link keys (bandwidth, latency", "found a list"]
        )
        self.expectError(
            "down:\n  latency: {a: 1}\n", at: 2, 12, keyPath: "down.latency",
            containing: ["expected a value, found a mapping"]
        )
        self.expectError(
            "- a\n- b\n", at: 1, 1, keyPath: "",
            containing: ["expected a mapping of profile keys, found a list"]
        )
        self.expectError("hello\n", at: 1, 1, keyPath: "", containing: ["found 'hello'"])
        self.expectError(
            "up:\n  loss: [1%]\n", at: 2, 9, keyPath: "up.loss",
            containing: ["expected a probability (e.g. 1%) or a mapping {model: gilbert-elliott", "found a list"]
        )
        self.expectError(
            "description: [a]\n", at: 1, 14, keyPath: "description", containing: ["expected a text, found a list"]
        )
        self.expectError("down:\n  latency:\n", at: 2, 11, keyPath: "down.latency", containing: ["has no value"])
    }

    @Test func malformedUnits() {
        self.expectError(
            "down:\n  latency: 400\n", at: 2, 12, keyPath: "down.latency",
            containing: ["'400' has no unit", "allowed: a number with a unit ns, us, ms, s, m (minutes) or h"]
        )
        self.expectError(
            "up:\n  bandwidth: 1MB/s\n", at: 2, 14, keyPath: "up.bandwidth",
            containing: ["use 8Mbit for 1MB/s"]
        )
        self.expectError(
            "up:\n  queue: 64kb\n", at: 2, 10, keyPath: "up.queue",
            containing: ["did you mean KB (bytes) or kbit (bits)?"]
        )
        self.expectError("mss: 1460\n", at: 1, 6, keyPath: "mss", containing: ["'1460' has no unit"])
        self.expectError("dns_delay: -1s\n", at: 1, 12, keyPath: "dns_delay", containing: ["is negative"])
    }

    @Test func absurdValues() {
        self.expectError(
            "down:\n  latency: 2h\n", at: 2, 12, keyPath: "down.latency",
            containing: ["2h is more than 1 hour; allowed: one-way delay 0…1h (e.g. 400ms)"]
        )
        self.expectError(
            "link:\n  jitter: 11s\n", at: 2, 11, keyPath: "link.jitter",
            containing: ["11s is more than 10s; allowed: 0…10s"]
        )
        self.expectError(
            "down:\n  bandwidth: 0\n", at: 2, 14, keyPath: "down.bandwidth",
            containing: ["a rate of 0 never delivers anything", "`offline`", "`loss: 100%`"]
        )
        self.expectError(
            "down:\n  connection_bandwidth: 0kbit\n", at: 2, 25, keyPath: "down.connection_bandwidth",
            containing: ["a rate of 0"]
        )
        self.expectError(
            "down:\n  bandwidth: 200Gbit\n", at: 2, 14, keyPath: "down.bandwidth",
            containing: ["more than 100Gbit"]
        )
        self.expectError(
            "down:\n  queue: 2GB\n", at: 2, 10, keyPath: "down.queue",
            containing: ["2GB is more than 1GB; allowed: mss…1GB"]
        )
        self.expectError(
            "up:\n  queue: 1000B\n", at: 2, 10, keyPath: "up.queue",
            containing: ["queue 1000B is smaller than one segment (mss 1460B); allowed: mss…1GB (e.g. 64KB)"]
        )
        self.expectError("mss: 10B\n", at: 1, 6, keyPath: "mss", containing: ["mss 10B is out of range"])
        self.expectError("dns_delay: 2h\n", at: 1, 12, keyPath: "dns_delay", containing: ["more than 1 hour"])
        self.expectError(
            "down:\n  loss: -1%\n", at: 2, 9, keyPath: "down.loss", containing: ["'-1%' is negative"]
        )
    }

    @Test func queueSmallerThanALargerMSS() {
        self.expectError(
            "mss: 9000B\nlink:\n  queue: 8KB\n", at: 3, 10, keyPath: "link.queue",
            containing: ["queue 8KB is smaller than one segment (mss 9000B)"]
        )
    }

    @Test func lossModels() throws {
        self.expectError(
            "down:\n  loss: {model: gilbert, p: 1%, r: 25%}\n", at: 2, 17, keyPath: "down.loss.model",
            containing: ["unknown value 'gilbert'", "allowed: gilbert-elliott"]
        )
        self.expectError(
            "down:\n  loss: {model: gilbert-elliott, p: 1%}\n", at: 2, 9, keyPath: "down.loss.r",
            containing: ["missing required key 'r'"]
        )
        self.expectError(
            "down:\n  loss: {p: 1%, r: 2%}\n", at: 2, 9, keyPath: "down.loss.model",
            containing: ["missing required key 'model'"]
        )
        self.expectError(
            "down:\n  loss: {model: gilbert-elliott, p: 1%, r: 0%}\n", at: 2, 44, keyPath: "down.loss.r",
            containing: ["never leaves the bad state"]
        )
        self.expectError(
            "down:\n  loss: {model: gilbert-elliott, p: 1%, r: 5%, bad: 1%}\n", at: 2, 48,
            keyPath: "down.loss.bad", containing: ["unknown key 'bad'", "allowed keys: model, p, r, loss_in_bad"]
        )
        let profile = try ProfileDecoder().decode(
            yaml: "down:\n  loss: {model: gilbert-elliott, p: 1%, r: 25%}\n", file: Self.file
        )
        #expect(
            profile.down.loss
                == .gilbertElliott(
                    p: Probability(0.01), r: Probability(0.25), lossInGood: .zero, lossInBad: .one
                ))
    }

    @Test func unknownTCP() {
        self.expectError(
            "tcp: reno\n", at: 1, 6, keyPath: "tcp", containing: ["unknown value 'reno'; allowed: cubic, bbr"]
        )
        self.expectError(
            "tcp: bbrr\n", at: 1, 6, keyPath: "tcp", containing: ["unknown value 'bbrr'; did you mean 'bbr'?"]
        )
    }

    @Test func unknownExtendsTarget() {
        self.expectError(
            "extends: edg\n", at: 1, 10, keyPath: "extends",
            containing: [
                "unknown profile 'edg'; did you mean 'edge'? built-in profiles: gprs, edge, 3g,",
                "offline, none; or a path to a .yaml file relative to this file",
            ]
        )
    }

    @Test func yamlSyntaxErrors() {
        // An unclosed flow sequence: libyaml notices at the end of the document.
        let unclosed = self.decodeError("down:\n  latency: [1,\n")
        #expect(unclosed?.message.hasPrefix("YAML syntax error: ") == true, "\(String(describing: unclosed))")
        #expect(unclosed?.line == 3 && unclosed?.column == 1, "\(String(describing: unclosed))")
        // A tab used for indentation.
        let tab = self.decodeError("down:\n\tlatency: 1ms\n")
        #expect(tab?.message.hasPrefix("YAML syntax error: ") == true)
        #expect(tab?.line == 2 && tab?.column == 1, "\(String(describing: tab))")
        // A bad indentation.
        let indent = self.decodeError("down:\n  latency: 1ms\n jitter: 1ms\n")
        #expect(indent?.message.hasPrefix("YAML syntax error: ") == true)
        #expect(indent?.line == 3, "\(String(describing: indent))")
        #expect(indent?.description.hasPrefix("Profiles/x.yaml:3:") == true)
    }

    /// libyaml's own words that name its API or leave the reader guessing are said in the file's terms.
    @Test func syntaxErrorsSayWhatIsWrongInTheFilesTerms() {
        let deep = self.decodeError(
            "down: " + String(repeating: "[", count: 1_100) + String(repeating: "]", count: 1_100) + "\n")
        #expect(deep?.message.contains("nested too deep") == true, "\(String(describing: deep))")
        #expect(deep?.message.contains("yaml_set_max_nest_level") == false)
        let alias = self.decodeError("name: x\ndown: *nope\n")
        #expect(alias?.line == 2)
        #expect(
            alias?.message.contains("a *name here refers to no &name anchor before it") == true,
            "\(String(describing: alias))")
    }

    /// A folder, and a symbolic link that leads nowhere, each said as what it is.
    @Test func aFolderOrALinkToNothingIsSaidAsSuch() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-decoder-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let loop = folder.appendingPathComponent("a.yaml").path
        try FileManager.default.createSymbolicLink(
            atPath: loop, withDestinationPath: folder.appendingPathComponent("b.yaml").path)
        try FileManager.default.createSymbolicLink(
            atPath: folder.appendingPathComponent("b.yaml").path, withDestinationPath: loop)
        #expect {
            try ProfileDecoder().decodeFile(atPath: loop)
        } throws: { error in
            (error as? ConfigError)?.message.contains("is a symbolic link to") == true
                && (error as? ConfigError)?.message.contains("leads to no file (missing, or a loop of links)") == true
        }
        let sub = folder.appendingPathComponent("p.yaml")
        try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
        #expect {
            try ProfileDecoder().decodeFile(atPath: sub.path)
        } throws: { error in
            (error as? ConfigError)?.message.hasSuffix(
                "is a folder; a profile is one .yaml file (netcond test takes a folder of scenarios)") == true
        }
    }

    @Test func emptyDocument() {
        for yaml in ["", "\n", "# only a comment\n", "~\n", "null"] {
            let error = self.decodeError(yaml)
            #expect(error?.line == 1 && error?.column == 1)
            #expect(error?.message.hasPrefix("the document is empty") == true, "\(String(describing: error))")
        }
    }

    @Test func duplicateKeys() {
        self.expectError(
            "down:\n  latency: 1ms\n  latency: 2ms\n", at: 2, 3, keyPath: "",
            containing: ["duplicate key 'latency': each key may appear only once in a mapping"]
        )
    }

    @Test func missingFile() {
        #expect {
            try ProfileDecoder().decodeFile(atPath: "/nonexistent/x.yaml")
        } throws: { error in
            (error as? ConfigError)?.description == "/nonexistent/x.yaml: no such file: /nonexistent/x.yaml"
        }
    }

    @Test func builtinsMustSayWhatAndWhere() {
        let decoder = ProfileDecoder(builtins: [(name: "b", yaml: "name: b\nsource: x\n")])
        #expect {
            try decoder.decodeBuiltin(named: "b")
        } throws: { error in
            let error = error as? ConfigError
            return error?.file == "Profiles/b.yaml" && error?.keyPath == "description"
                && error?.message.contains("missing required key 'description'") == true
        }
    }

    // MARK: - extends

    @Test func extendsABuiltinMergesPerKey() throws {
        let profile = try ProfileDecoder().decode(yaml: "extends: edge\ndown: {latency: 1s}\n", file: "slow.yaml")
        #expect(profile.name == "slow")
        #expect(profile.description == "Based on edge.")
        #expect(profile.down.latency == .seconds(Int64(1)))
        #expect(profile.down.bandwidth == .kbit(240))
        #expect(profile.down.queue == ByteCount(bytes: 65_536))
        #expect(profile.up.latency == .milliseconds(440))
        #expect(profile.up.bandwidth == .kbit(200))
    }

    @Test func extendsWithLinkOverridesBothDirectionsOfTheBase() throws {
        let profile = try ProfileDecoder().decode(yaml: "extends: edge\nlink: {loss: 2%}\n", file: Self.file)
        #expect(profile.down.loss == .bernoulli(Probability(0.02)))
        #expect(profile.up.loss == .bernoulli(Probability(0.02)))
        #expect(profile.down.latency == .milliseconds(400))
    }

    @Test func extendsNone() throws {
        let profile = try ProfileDecoder().decode(yaml: "extends: none\nup: {latency: 5ms}\n", file: Self.file)
        #expect(profile.up.latency == .milliseconds(5) && profile.down == LinkDirection())
    }

    @Test func extendsAFileRelativeToThisFile() throws {
        let directory = try ProfileTestDirectory()
        try directory.write("base.yaml", "tcp: bbr\ndown: {bandwidth: 2Mbit, latency: 30ms}\n")
        try directory.write("sub/child.yaml", "extends: ../base.yaml\ndown: {latency: 60ms}\n")
        let profile = try ProfileDecoder().decodeFile(atPath: directory.path("sub/child.yaml"))
        #expect(profile.name == "child")
        #expect(profile.tcp == .bbr)
        #expect(profile.down.bandwidth == .mbit(2) && profile.down.latency == .milliseconds(60))
        // The base of a file may itself extend a built-in.
        try directory.write("base.yaml", "extends: 3g\n")
        #expect(try ProfileDecoder().decodeFile(atPath: directory.path("sub/child.yaml")).down.bandwidth == .kbit(780))
    }

    @Test func extendsAMissingFile() throws {
        let directory = try ProfileTestDirectory()
        try directory.write("child.yaml", "name: c\nextends: gone.yaml\n")
        #expect {
            try ProfileDecoder().decodeFile(atPath: directory.path("child.yaml"))
        } throws: { error in
            let error = error as? ConfigError
            return error?.line == 2 && error?.column == 10 && error?.keyPath == "extends"
                && error?.message.hasPrefix("no such file: ") == true && error?.message.hasSuffix("gone.yaml") == true
        }
    }

    @Test func extendsCycleIsAnError() throws {
        let directory = try ProfileTestDirectory()
        try directory.write("a.yaml", "extends: b.yaml\n")
        try directory.write("b.yaml", "down: {latency: 1ms}\nextends: ./a.yaml\n")
        #expect {
            try ProfileDecoder().decodeFile(atPath: directory.path("a.yaml"))
        } throws: { error in
            let error = error as? ConfigError
            return error?.file == directory.path("b.yaml") && error?.line == 2 && error?.column == 10
                && error?.message == "extends cycle: a.yaml → b.yaml → a.yaml"
        }
        try directory.write("self.yaml", "extends: self.yaml\n")
        #expect {
            try ProfileDecoder().decodeFile(atPath: directory.path("self.yaml"))
        } throws: { error in
            (error as? ConfigError)?.message == "extends cycle: self.yaml → self.yaml"
        }
    }

    @Test func builtinExtendsCycleIsAnError() {
        let decoder = ProfileDecoder(builtins: [
            (name: "a", yaml: "name: a\ndescription: d\nsource: s\nextends: b\n"),
            (name: "b", yaml: "name: b\ndescription: d\nsource: s\nextends: a\n"),
        ])
        #expect {
            try decoder.decodeBuiltin(named: "a")
        } throws: { error in
            let error = error as? ConfigError
            return error?.description == "Profiles/b.yaml:4:10: extends: extends cycle: a → b → a"
        }
    }

    @Test func builtinsCannotExtendFiles() {
        let decoder = ProfileDecoder(builtins: [
            (name: "a", yaml: "name: a\ndescription: d\nsource: s\nextends: ./x.yaml\n")
        ])
        #expect(throws: ConfigError.self) { try decoder.decodeBuiltin(named: "a") }
    }

    @Test func refusedFileReferencesReadNothing() throws {
        let directory = try ProfileTestDirectory()
        try directory.write("secret.yaml", "name: secret\ndown: {latency: 1ms}\n")
        let decoder = ProfileDecoder(fileReferences: .refused(reason: "send it whole"))
        let texts = [
            ("extends: \(directory.path("secret.yaml"))\n", "extends"),
            ("extends: ./secret.yaml\n", "extends"),
            ("extends: missing.yaml\n", "extends"),  // not "no such file": whether a file exists stays unsaid
            ("schedule: {phases: [{for: 1s, use: secret.yaml}]}\n", "schedule.phases[0].use"),
            ("extends: 3g\nschedule: {phases: [{for: 1s}, {for: 1s, use: ../x/s.yaml}]}\n", "schedule.phases[1].use"),
        ]
        for (text, keyPath) in texts {
            #expect {
                try decoder.decode(yaml: text, file: directory.path("mine.yaml"))
            } throws: { error in
                let error = error as? ConfigError
                return error?.keyPath == keyPath && error?.message.hasSuffix("is a path; send it whole") == true
            }
        }
        // Built-ins are still fine; the same text with files allowed reads them.
        let builtins = "extends: edge\nschedule: {phases: [{for: 1s, use: 3g}, {for: 1s, use: none}]}\n"
        #expect(try decoder.decode(yaml: builtins, file: directory.path("mine.yaml")).schedule?.phases.count == 2)
        let allowed = try ProfileDecoder().decode(yaml: "extends: ./secret.yaml\n", file: directory.path("mine.yaml"))
        #expect(allowed.down.latency == .milliseconds(1))
    }

    // MARK: - No crash on any input

    @Test func brokenDocumentsNeverCrash() {
        let broken = [
            "{", "}", "[", "]", ":", "- - -", "? a\n: b", "&a [*a]", "*a", "down: *x", "a: &x 1\nb: *x",
            "down: {latency: }", "down: {{}: 1}", "down: {[1]: 1}", "!!binary xx", "down: !!int 1",
            "\u{0}", "'unterminated", "\"bad \\q escape\"", "down:\n  - latency: 1ms",
            "link: {loss: {model: gilbert-elliott, p: [1], r: {}}}", "---\nname: a\n---\nname: b\n",
            "%YAML 9.9\n---\nname: x", "down: {latency: 1ms, latency: 2ms}",
            String(repeating: "[", count: 200), String(repeating: "a: ", count: 200),
            "down: {bandwidth: 99999999999999999999999Gbit}", "down: {queue: 1.7976931348623157e308B}",
            "down: {loss: 1e400%}", "mss: NaNB", "down: {latency: infs}",
        ]
        for yaml in broken {
            let error = self.decodeError(yaml)
            #expect(error != nil, "accepted: \(yaml.debugDescription)")
            #expect((error?.line ?? 1) >= 1, "\(String(describing: error))")
        }
    }

    @Test func mutatedBuiltinsNeverCrash() {
        let insertions = ["", "[", ": ", "\t", "- ", "{", "\"", "&a ", "*a", "#", "\n"]
        for (_, yaml) in BuiltinProfiles.all.prefix(4) {
            let characters = Array(yaml)
            var index = 0
            while index < characters.count {
                for insertion in insertions {
                    var mutated = characters
                    if insertion.isEmpty {
                        mutated.remove(at: index)
                    } else {
                        mutated.insert(contentsOf: insertion, at: index)
                    }
                    if let error = self.decodeError(String(mutated)) {
                        #expect(!error.message.isEmpty)
                    }
                }
                index += 5
            }
        }
    }
}

/// A fresh directory under the system temporary directory, removed when the value is released.
final class ProfileTestDirectory {
    let root: String

    init() throws {
        self.root = (NSTemporaryDirectory() as NSString).appendingPathComponent("netcond-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: self.root, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.root)
    }

    func path(_ relative: String) -> String {
        (self.root as NSString).appendingPathComponent(relative)
    }

    func write(_ relative: String, _ text: String) throws {
        let path = self.path(relative)
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true
        )
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }
}

/// What a file may not say: values that look like one thing and are another.
@Suite struct StrictValuesTests {
    @Test func aQuotedNumberIsNotANumber() throws {
        let yaml = "extends: lte\nfaults:\n  - {status: '503'}\n"
        #expect(throws: ConfigError.self) { try ProfileDecoder().decode(yaml: yaml, file: "p.yaml") }
        do {
            _ = try ProfileDecoder().decode(yaml: yaml, file: "p.yaml")
        } catch {
            #expect(error.description.contains("'503' is quoted, so it is text"), "\(error)")
            #expect(error.description.hasPrefix("p.yaml:3:"), "\(error)")
        }
        #expect(throws: Never.self) {
            try ProfileDecoder().decode(yaml: "extends: lte\nfaults:\n  - {status: 503}\n", file: "p.yaml")
        }
    }

    @Test func tagsOutsideTheCoreSchemaAreRefused() {
        for yaml in ["extends: !!python/object:os.system lte\n", "down: !custom {latency: 10ms}\n"] {
            do {
                _ = try ProfileDecoder().decode(yaml: yaml, file: "t.yaml")
                Issue.record("accepted \(yaml)")
            } catch {
                #expect(error.description.contains("means nothing here"), "\(error)")
            }
        }
        #expect(throws: Never.self) {
            try ProfileDecoder().decode(yaml: "description: !!str 12\ndown: {latency: 10ms}\n", file: "t.yaml")
        }
    }

    /// Aliases of aliases ("billion laughs", 306 bytes standing for 9⁹ values) are refused at the
    /// alias that goes past the limit, before anything walks the tree (it hung validate and the
    /// control API); a document that uses aliases within reason reads as before.
    @Test func anAliasBombIsRefusedWhereItGoesPastTheLimit() {
        var yaml = "a: &a [x,x,x,x,x,x,x,x,x]\n"
        var previous = "a"
        for name in ["b", "c", "d", "e", "f", "g", "h", "i"] {
            yaml += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ",") + "]\n"
            previous = name
        }
        let error = ProfileDecoderTests().decodeError(yaml)
        #expect(error?.line == 6, "\(String(describing: error))")
        #expect(error?.message.contains("aliases") == true && error?.message.contains("allowed: up to 200000") == true)
        // As a mapping key too: hashing a key for the duplicate check walked it whole.
        let key = ProfileDecoderTests().decodeError(
            "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                + "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n? *f\n: 1\n"
        )
        #expect(key?.message.contains("aliases") == true, "\(String(describing: key))")
        #expect(YAMLExpansion.firstExcess(in: "base: &b {latency: 10ms}\nup: *b\ndown: *b\n") == nil)
        #expect(throws: Never.self) {
            try ProfileDecoder().decode(yaml: "up: &l {latency: 10ms}\ndown: *l\n", file: "t.yaml")
        }
    }

    /// A value's error quotes at most 200 characters of it, and a unit value past 64 characters is refused at once.
    @Test func anErrorQuotesAtMostOneShortLine() {
        let long = String(repeating: "9", count: 50_000)
        let error = ProfileDecoderTests().decodeError("down: {latency: \(long)ms}\n")
        #expect((error?.description.count ?? .max) < 600, "\(error?.description.count ?? -1)")
        #expect(error?.message.contains("too long to be one value") == true, "\(String(describing: error))")
    }
}
