import Foundation
import Testing

@testable import NetcondCore

/// Scenario files: every section decodes, and every bad value names file:line:column, the key and
/// what is allowed.
@Suite struct ScenarioDecoderTests {
    static let file = "Scenarios/test.yaml"

    static let full = """
        name: demo
        description: a demo
        profile: 3g
        origin:
          files:
            big.bin: {size: 2MB, seed: 7}
          faults:
            - {file: big.bin, cut_after: 600KB, first: 1}
            - {file: big.bin, status: 503, retry_after: 2s, requests: [2, 3]}
            - {file: big.bin, hang: true}
        timeline:
          - {at: 5s, outage: refuse}
          - {at: 2s, stall: down}
          - {at: 5s, outage: end}
          - {at: 1s, fault: {status: 500, first: 1}}
          - {at: 3s, captive: open}
          - {at: 4s, faults: clear}
          - {at: 6s, profile: edge}
          - {after_request: 1, of: /files/big.bin, captive: close}
          - {after_bytes: 300KB, stall: end}
          - {after_bytes: 600KB, cut: reset}
          - {at: 7s, cut: close}
        client:
          command: curl -o "$NETCOND_OUTPUT" "$NETCOND_URL"
          url: /files/big.bin
          output: big.bin
          env: {A: b}
          deadline: 30s
        checks:
          completes: {}
          resumes: {slack: 32KB, tolerance: 10%}
          backs-off: {factor: 2, max_per_minute: 10, recovery: 5s}
        """

    func decode(_ yaml: String) throws(ConfigError) -> Scenario {
        try ScenarioDecoder.decode(yaml: yaml, file: Self.file)
    }

    @Test func everySectionDecodes() throws {
        let scenario = try self.decode(Self.full)
        #expect(scenario.name == "demo")
        #expect(scenario.profile.name == "3g")
        #expect(scenario.origin.files == [OriginFile(name: "big.bin", size: ByteCount(bytes: 2 << 20), seed: 7)])
        #expect(
            scenario.origin.faults == [
                HTTPFault(
                    file: "big.bin", action: .cut(after: ByteCount(bytes: 600 * 1024), end: .fin),
                    select: FaultSelection(first: 1)),
                HTTPFault(
                    file: "big.bin", action: .status(503, retryAfter: .seconds(2)),
                    select: FaultSelection(requests: [2, 3])),
                HTTPFault(file: "big.bin", action: .hang),
            ])
        // File order; each event waits for its own trigger.
        #expect(
            scenario.timeline.map(\.trigger) == [
                .at(.seconds(5)), .at(.seconds(2)), .at(.seconds(5)), .at(.seconds(1)), .at(.seconds(3)),
                .at(.seconds(4)), .at(.seconds(6)),
                .afterRequests(1, of: .file("big.bin")), .afterBytes(ByteCount(bytes: 300 * 1024)),
                .afterBytes(ByteCount(bytes: 600 * 1024)), .at(.seconds(7)),
            ])
        #expect(scenario.timeline[0].action == .outage(.refuse))
        #expect(scenario.timeline[2].action == .outage(nil))
        #expect(scenario.timeline[1].action == .stall(.down))
        #expect(scenario.timeline[4].action == .captive(open: true))
        #expect(scenario.timeline[5].action == .clearFaults)
        #expect(scenario.timeline[7].action == .captive(open: false))
        #expect(scenario.timeline[9].action == .cut(.reset))
        #expect(scenario.timeline[10].action == .cut(.close))
        if case .switchProfile(let profile) = scenario.timeline[6].action {
            #expect(profile.name == "edge")
        } else {
            Issue.record("no profile switch")
        }
        #expect(scenario.client.command == ["/bin/sh", "-c", #"curl -o "$NETCOND_OUTPUT" "$NETCOND_URL""#])
        #expect(scenario.client.url == "/files/big.bin")
        #expect(scenario.client.output == "big.bin")
        #expect(scenario.client.environment == ["A": "b"])
        #expect(scenario.client.deadline == .seconds(30))
        #expect(
            scenario.checks == [
                .completes(CompletesCheck(exit: 0, files: [OutputFile(output: "big.bin", file: "big.bin")])),
                .resumes(ResumesCheck(file: "big.bin", slack: ByteCount(bytes: 32 * 1024), tolerance: 0.1)),
                .backsOff(
                    BacksOffCheck(file: "big.bin", factor: 2, jitter: 0.2, maxPerMinute: 10, recovery: .seconds(5))),
            ])
    }

    @Test func inlineProfileKeepsThisFilesPositions() throws {
        let scenario = try self.decode("profile:\n  extends: edge\n  down: {latency: 50ms}\nchecks:\n  completes: {}\n")
        #expect(scenario.profile.down.latency == .milliseconds(50))
        #expect(scenario.profile.name == "test")
        let error = #expect(throws: ConfigError.self) {
            try self.decode("profile:\n  down: {latency: fast}\nchecks:\n  completes: {}\n")
        }
        #expect(error?.line == 2)
        #expect(error?.keyPath == "profile.down.latency")
    }

    @Test func everyWrongKeyIsReportedButNoneThatOnlyFollowsFromAnother() throws {
        // The profile is wrong (twice, inline), the origin's file too, the engine, and an unknown
        // key; the timeline and the client name the file the origin failed to define: they are
        // not blamed for it.
        let yaml = """
            profile:
              down: {latency: fast, loss: 200%}
            origin:
              files: {big.bin: {size: huge}}
            engine: warp
            timeline:
              - {after_request: 1, of: /files/big.bin, captive: close}
            client: {url: /files/big.bin}
            checks: {completes: {}}
            colour: blue
            """
        let error = #expect(throws: ConfigError.self) { try self.decode(yaml) }
        #expect(
            error?.all.map(\.keyPath) == [
                "profile.down.latency", "profile.down.loss", "origin.files.big.bin.size", "engine", "colour",
            ], "\(error?.all ?? [])")
    }

    @Test func aMisspeltKeyIsTheOnlyErrorItCauses() throws {
        // `orgin` is origin misspelt: the timeline and client that name its file are not blamed,
        // nor is `profle`'s or `chekcs`'s absence ("missing required key").
        let yaml = """
            profle: edge
            orgin:
              files: {big.bin: {size: 1MB}}
            timeline:
              - {after_request: 1, of: /files/big.bin, captive: close}
            client: {url: /files/big.bin}
            chekcs: {completes: {}}
            """
        let error = #expect(throws: ConfigError.self) { try self.decode(yaml) }
        #expect(error?.all.map(\.keyPath) == ["profle", "orgin", "chekcs"], "\(error?.all ?? [])")
        #expect(error?.all.allSatisfy { $0.message.contains("did you mean") } == true)
        // A key that is truly missing, beside an unknown key that is no misspelling of it, is still said.
        let missing = #expect(throws: ConfigError.self) { try self.decode("profile: edge\ncolour: blue\n") }
        #expect(missing?.all.map(\.keyPath) == ["checks", "colour"], "\(missing?.all ?? [])")
    }

    @Test func aProfileFilesErrorsFollowTheScenariosOwnEachFileInItsOrder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-order-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "down:\n  latency: fast\n  loss: 200%\n".write(
            to: folder.appendingPathComponent("link.yaml"), atomically: true, encoding: .utf8)
        let scenario = folder.appendingPathComponent("s.yaml").path
        let error = #expect(throws: ConfigError.self) {
            try ScenarioDecoder.decode(
                yaml: "colour: blue\nprofile: link.yaml\nengine: warp\nchecks: {completes: {}}\n", file: scenario)
        }
        let link = folder.appendingPathComponent("link.yaml").path
        #expect(
            error?.all.map { "\($0.file):\($0.line)" } == ["\(scenario):1", "\(scenario):3", "\(link):2", "\(link):3"],
            "\(error?.all ?? [])")
    }

    @Test func shippedScenariosAreValid() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scenarios")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".yaml") }
        #expect(names.count >= 3)
        for name in names {
            let path = directory.appendingPathComponent(name).path
            let scenario = try ScenarioDecoder.decodeFile(atPath: path)
            #expect(!scenario.description.isEmpty, "\(name) needs a description")
            #expect(scenario.name + ".yaml" == name)
            #expect(ScenarioDecoder.looksLikeScenario(yaml: try String(contentsOfFile: path, encoding: .utf8)))
        }
    }

    @Test(arguments: [
        ("profile: edge\nchecks: {complets: {}}\n", 2, "checks.complets", "did you mean 'completes'"),
        ("checks: {completes: {}}\n", 1, "profile", "missing required key 'profile'"),
        ("profile: edg\nchecks: {completes: {}}\n", 1, "profile", "did you mean 'edge'"),
        ("profile: edge\n", 1, "checks", "missing required key 'checks'"),
        ("profile: edge\nchecks: {}\n", 2, "checks", "no checks"),
        (
            "profile: edge\norigin: {files: {big.bin: {size: 0B}}}\nchecks: {completes: {}}\n", 2,
            "origin.files.big.bin.size", "out of range"
        ),
        (
            "profile: edge\norigin: {files: {'../x': {size: 1KB}}}\nchecks: {completes: {}}\n", 2, "origin.files.../x",
            "not allowed"
        ),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}, faults: [{file: b, hang: true}]}\nchecks: {completes: {}}\n",
            2, "origin.faults[0].file", "unknown file 'b'"
        ),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}, faults: [{file: a}]}\nchecks: {completes: {}}\n", 2,
            "origin.faults[0]", "does nothing"
        ),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}, faults: [{file: a, hang: true, status: 503}]}\nchecks: {completes: {}}\n",
            2, "origin.faults[0].status", "one fault does one thing"
        ),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}, faults: [{file: a, status: 200}]}\nchecks: {completes: {}}\n",
            2, "origin.faults[0].status", "400…599"
        ),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}, faults: [{file: a, cut_after: 1KB, retry_after: 2s}]}\nchecks: {completes: {}}\n",
            2, "origin.faults[0].retry_after", "goes with status"
        ),
        (
            "profile: edge\ntimeline: [{at: 5s, outage: sometimes}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].outage", "allowed: blackhole, refuse, reset, end"
        ),
        (
            "profile: edge\ntimeline: [{outage: refuse}]\nchecks: {completes: {}}\n", 2, "timeline[0].at",
            "missing required key 'at'"
        ),
        (
            "profile: edge\ntimeline: [{at: 1s, cut: all}]\nchecks: {completes: {}}\n", 2, "timeline[0].cut",
            "allowed: reset, close"
        ),
        (
            "profile: edge\ntimeline: [{at: 1s, remove_fault: flaky}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].remove_fault", "no fault named 'flaky'"
        ),
        (
            "profile: edge\ntimeline: [{at: 1s, fault: {name: all, status: 503}}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].fault.name", "cannot name a fault"
        ),
        (
            "profile: edge\ntimeline: [{at: 1s, fault: {name: s, status: 503}}, {at: 2s, profile: lte}, {at: 3s, remove_fault: s}]\nchecks: {completes: {}}\n",
            2, "timeline[2].remove_fault", "no fault named 's'"
        ),
        (
            "profile: edge\ntimeline: [{at: 1s, fault: {name: slow, status: 503}}, {at: 2s, remove_fault: flaky}]\nchecks: {completes: {}}\n",
            2, "timeline[1].remove_fault", "allowed: slow"
        ),
        ("profile: edge\ntimeline: [{at: soon, outage: refuse}]\nchecks: {completes: {}}\n", 2, "timeline[0].at", ""),
        (
            "profile: edge\ntimeline: [{at: 1s, outage: refuse, stall: up}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].stall", "one event does one thing"
        ),
        (
            "profile: edge\ntimeline: [{at: 1s, after_request: 1, stall: up}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].after_request", "exclude each other"
        ),
        (
            "profile: edge\ntimeline: [{after_request: 1, of: /files/x, stall: up}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].of", "not a file or endpoint"
        ),
        (
            "profile: edge\ntimeline: [{at: 1s, of: /files/x, stall: up}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].of", "goes with after_request"
        ),
        (
            "profile: edge\ntimeline: [{after_bytes: lots, stall: up}]\nchecks: {completes: {}}\n", 2,
            "timeline[0].after_bytes", ""
        ),
        (
            "profile: edge\nclient: {url: files/x}\nchecks: {completes: {}}\n", 2, "client.url",
            "neither a path nor a URL"
        ),
        (
            "profile: edge\nclient: {url: /files/x}\nchecks: {completes: {}}\n", 2, "client",
            "origin.files does not define"
        ),
        (
            "profile: edge\nclient: {output: ../x}\nchecks: {completes: {}}\n", 2, "client.output",
            "not a plain file name"
        ),
        (
            "profile: edge\nclient: {output: -1}\nchecks: {completes: {}}\n", 2, "client.output",
            "a number or a boolean in YAML"
        ),
        (
            "profile: edge\nclient: {output: true}\nchecks: {completes: {}}\n", 2, "client.output",
            "quoted if it looks like a number"
        ),
        ("profile: edge\nclient: {deadline: 10ms}\nchecks: {completes: {}}\n", 2, "client.deadline", "100ms…1h"),
        ("profile: edge\nchecks: {resumes: {}}\n", 2, "checks.resumes", "which file?"),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}}\nchecks: {backs-off: {file: a, factor: 0.5}}\n", 3,
            "checks.backs-off.factor", "1…10"
        ),
        ("profile: edge\nchecks: {completes: {exit: 300}}\n", 2, "checks.completes.exit", "0…255"),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}, faults: [{file: a, delay: 2h}]}\nchecks: {completes: {}}\n",
            2, "origin.faults[0].delay", "1ms…1h"
        ),
        ("profile: edge\nchecks: {stays-usable: {}}\n", 2, "checks.stays-usable", "nothing to judge"),
        ("profile: edge\nchecks: {stays-usable: {lines: '^ok'}}\n", 2, "checks.stays-usable", "steps without a budget"),
        (
            "profile: edge\nchecks: {stays-usable: {lines: '(', budget: 1s}}\n", 2, "checks.stays-usable.lines",
            "not a regular expression"
        ),
        (
            "profile: edge\nchecks: {stays-usable: {lines: x, requests: /a, budget: 1s}}\n", 2,
            "checks.stays-usable.lines", "exclude each other"
        ),
        (
            "profile: edge\nchecks: {stays-usable: {requests: 'files/*', budget: 1s}}\n", 2,
            "checks.stays-usable.requests", "not a path"
        ),
        (
            "profile: edge\nchecks: {stays-usable: {gives_up_within: 10ms}}\n", 2,
            "checks.stays-usable.gives_up_within", "100ms…1h"
        ),
        (
            "profile: edge\nchecks: {stays-usable: {budget: 1s, gives_up_within: 5s}}\n", 2,
            "checks.stays-usable.budget", "budget without steps"
        ),
        (
            "profile: edge\nchecks: {stays-usable: {within: 1s, gives_up_within: 5s}}\n", 2,
            "checks.stays-usable.within", "within without steps"
        ),
        (
            "profile: edge\nchecks: {stays-usabel: {gives_up_within: 5s}}\n", 2, "checks.stays-usabel",
            "did you mean 'stays-usable'"
        ),
        (
            "profile: edge\norigin: {api: {orders: {method: PUT}}}\nchecks: {completes: {}}\n", 2,
            "origin.api.orders.method", "allowed"
        ),
        (
            "profile: edge\norigin: {api: {orders: {method: POST, json: '{}'}}}\nchecks: {completes: {}}\n", 2,
            "origin.api.orders.json", "with method: GET"
        ),
        (
            "profile: edge\norigin: {api: {p: {json: '{nope'}}}\nchecks: {completes: {}}\n", 2, "origin.api.p.json",
            "is not JSON"
        ),
        (
            "profile: edge\norigin: {api: {orders: {method: POST}}, faults: [{api: order, drop_response: true}]}\nchecks: {completes: {}}\n",
            2, "origin.faults[0].api", "did you mean 'orders'"
        ),
        (
            "profile: edge\norigin: {files: {a: {size: 1KB}}, api: {o: {method: POST}}, faults: [{api: o, file: a, hang: true}]}\nchecks: {completes: {}}\n",
            2, "origin.faults[0].file", "both say which requests"
        ),
        (
            "profile: edge\nclient: {url: /api/orders}\nchecks: {completes: {}}\n", 2, "client",
            "origin.api does not define"
        ),
        ("profile: edge\nchecks: {idempotent: {}}\n", 2, "checks.idempotent", "which endpoint?"),
        (
            "profile: edge\norigin: {api: {p: {}}}\nchecks: {idempotent: {api: p}}\n", 3, "checks.idempotent.api",
            "is a GET endpoint"
        ),
    ])
    func badInputNamesTheSpot(yaml: String, line: Int, keyPath: String, message: String) {
        let error = #expect(throws: ConfigError.self) { try self.decode(yaml) }
        #expect(error?.file == Self.file)
        #expect(error?.line == line, "\(error?.description ?? "")")
        #expect(error?.keyPath == keyPath, "\(error?.description ?? "")")
        if !message.isEmpty { #expect(error?.description.contains(message) == true, "\(error?.description ?? "")") }
    }

    @Test func staysUsableAndDelayDecode() throws {
        let scenario = try self.decode(
            """
            profile: edge
            origin: {files: {a: {size: 1KB}}, faults: [{file: a, delay: 45s}]}
            checks:
              stays-usable: {lines: '^loaded ', budget: 3s, min_steps: 4, within: 20s, gives_up_within: 30s}
            """)
        #expect(scenario.origin.faults == [HTTPFault(file: "a", action: .delay(.seconds(Int64(45))))])
        #expect(
            scenario.checks == [
                .staysUsable(
                    StaysUsableCheck(
                        steps: .lines("^loaded "), budget: .seconds(Int64(3)), minSteps: 4, within: .seconds(Int64(20)),
                        givesUpWithin: .seconds(Int64(30))))
            ])
    }

    @Test func apiEndpointsDropResponseAndIdempotentDecode() throws {
        let scenario = try self.decode(
            """
            profile: edge
            origin:
              api:
                orders: {method: POST}
                profile: {json: '{"name": "Ada"}'}
              faults: [{api: orders, drop_response: true, first: 1}]
            client: {url: /api/orders}
            checks: {idempotent: {}}
            """)
        #expect(
            scenario.origin.api == [
                OriginAPI(name: "orders", method: .post), OriginAPI(name: "profile", json: "{\"name\": \"Ada\"}"),
            ])
        #expect(
            scenario.origin.faults == [
                HTTPFault(api: "orders", method: "POST", action: .dropResponse, select: FaultSelection(first: 1))
            ])
        #expect(scenario.checks == [.idempotent(IdempotentCheck(api: "orders"))])
    }

    @Test func theClientsDirectoryIsResolvedAgainstTheScenariosFolderAndMustExist() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-test-\(getpid())-directory")
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("client"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("s.yaml").path
        let scenario = try ScenarioDecoder.decode(
            yaml: "profile: edge\nclient: {directory: client}\nchecks: {completes: {}}\n", file: file)
        #expect(scenario.client.directory == folder.appendingPathComponent("client").path)
        #expect(
            try ScenarioDecoder.decode(yaml: "profile: edge\nchecks: {completes: {}}\n", file: file).client.directory
                == nil)
        let error = #expect(throws: ConfigError.self) {
            try ScenarioDecoder.decode(
                yaml: "profile: edge\nclient:\n  directory: nowhere\nchecks: {completes: {}}\n", file: file)
        }
        let message = error.map { "\($0)" } ?? ""
        #expect(message.contains("s.yaml:3:"), "\(message)")
        #expect(message.contains("no folder '\(folder.path)/nowhere'"), "\(message)")
    }

    @Test func anOutputThatLooksLikeANumberIsTakenOnlyInQuotes() throws {
        #expect(
            try self.decode("profile: edge\nclient: {output: '-1'}\nchecks: {completes: {}}\n").client.output == "-1")
        #expect(
            try self.decode("profile: edge\nclient: {output: v1.bin}\nchecks: {completes: {}}\n").client.output
                == "v1.bin")
    }

    @Test func aNamedFaultCanBeRemovedLater() throws {
        let yaml = """
            profile: {extends: edge, faults: [{name: flaky, status: 503}]}
            timeline:
              - {at: 1s, fault: {name: slow, first_byte: 2s}}
              - {at: 2s, remove_fault: slow}
              - {at: 3s, remove_fault: flaky}
            checks: {completes: {}}
            """
        let scenario = try self.decode(yaml)
        #expect(
            scenario.timeline.map(\.action).suffix(2) == [.removeFault(named: "slow"), .removeFault(named: "flaky")])
    }

    @Test func originPathsOfClientURLs() {
        #expect(ClientSpec(url: "/files/a.bin").originPath == "/files/a.bin")
        #expect(ClientSpec(url: "https://origin.netcond.test/files/a.bin").originPath == "/files/a.bin")
        #expect(ClientSpec(url: "http://ORIGIN.netcond.test:8080/api/x").originPath == "/api/x")
        #expect(ClientSpec(url: "https://origin.netcond.test").originPath == "/")
        #expect(ClientSpec(url: "https://origin.netcond.test.example/x").originPath == nil)
        #expect(ClientSpec(url: "https://example.com/files/a.bin").originPath == nil)
        #expect(ClientSpec().originPath == nil)
    }

    @Test func triggersFireAtTheirMoments() {
        let none: [OriginTarget: Int] = [:]
        #expect(
            !ScenarioTrigger.at(.seconds(2)).isDue(
                elapsed: .milliseconds(1999), finished: 9, finishedFor: none, delivered: 9))
        #expect(
            ScenarioTrigger.at(.seconds(2)).isDue(elapsed: .seconds(2), finished: 0, finishedFor: none, delivered: 0))
        #expect(
            !ScenarioTrigger.afterRequests(2, of: nil).isDue(
                elapsed: .seconds(60), finished: 1, finishedFor: none, delivered: 0))
        #expect(
            ScenarioTrigger.afterRequests(2, of: nil).isDue(
                elapsed: .zero, finished: 2, finishedFor: none, delivered: 0))
        let one: [OriginTarget: Int] = [.file("a"): 1, .api("orders"): 3]
        #expect(
            ScenarioTrigger.afterRequests(1, of: .file("a")).isDue(
                elapsed: .zero, finished: 4, finishedFor: one, delivered: 0))
        #expect(
            !ScenarioTrigger.afterRequests(1, of: .file("b")).isDue(
                elapsed: .zero, finished: 4, finishedFor: one, delivered: 0))
        #expect(
            ScenarioTrigger.afterBytes(ByteCount(bytes: 100)).isDue(
                elapsed: .zero, finished: 0, finishedFor: none, delivered: 100))
        #expect(
            !ScenarioTrigger.afterBytes(ByteCount(bytes: 100)).isDue(
                elapsed: .zero, finished: 0, finishedFor: none, delivered: 99))
    }

    @Test func scenariosAreToldFromProfilesByTheirTopKeys() {
        #expect(ScenarioDecoder.looksLikeScenario(yaml: "profile: lte\nchecks: {completes: {}}\n"))
        #expect(ScenarioDecoder.looksLikeScenario(yaml: #"{"profile": "lte", "client": {"command": "true"}}"#))
        #expect(ScenarioDecoder.looksLikeScenario(yaml: "profile: lte\nchecks :\n  completes: {}\n"))
        #expect(!ScenarioDecoder.looksLikeScenario(yaml: "extends: edge\ndown: {latency: 1s}\n"))
        #expect(!ScenarioDecoder.looksLikeScenario(yaml: "down:\n  checks: 1\n"))
        #expect(!ScenarioDecoder.looksLikeScenario(yaml: "checks: [unclosed\n"))
    }

    @Test func missingProfileFileNamesTheScenarioLine() {
        let error = #expect(throws: ConfigError.self) {
            try self.decode("profile: nowhere/edge.yaml\nchecks: {completes: {}}\n")
        }
        #expect(error?.line == 1)
        #expect(error?.description.contains("nowhere/edge.yaml") == true)
    }
}
