import Foundation
import Testing

@testable import NetcondCore

/// `faults:` in profile files and a single fault's text (the control API): every kind, matcher and
/// selector, and a clear error for each bad value.
@Suite struct FaultDecodingTests {
    let errors = ProfileDecoderTests()

    func fault(_ text: String) throws(ConfigError) -> HTTPFault {
        try HTTPFault.decode(yaml: text, file: "fault")
    }

    @Test func everyKindDecodes() throws {
        #expect(try self.fault("{status: 503, retry_after: 5s}").action == .status(503, retryAfter: .seconds(5)))
        #expect(try self.fault("{status: 429, retry_after: 120}").action == .status(429, retryAfter: .seconds(120)))
        #expect(
            try self.fault("{status: 503, retry_after: 'Wed, 21 Oct 2026 07:28:00 GMT'}").action
                == .status(503, retryAfter: .date("Wed, 21 Oct 2026 07:28:00 GMT"))
        )
        #expect(try self.fault("{status: 500}").action == .status(500, retryAfter: nil))
        #expect(try self.fault("{first_byte: 30s}").action == .delay(.seconds(30)))
        #expect(
            try self.fault("{truncate_after: 100KB}").action == .cut(after: ByteCount(bytes: 100 * 1024), end: .fin))
        #expect(try self.fault("{reset_after: 1MB}").action == .cut(after: ByteCount(bytes: 1024 * 1024), end: .reset))
        #expect(try self.fault("{drop_response: true}").action == .dropResponse)
        #expect(try self.fault("{slow_close: 10s}").action == .slowClose(.seconds(10)))
    }

    @Test func matchersAndSelectors() throws {
        let fault = try self.fault(
            #"{"name": "api down", "match": {"host": "*.netcond.test", "path": "/api/*", "method": "post"}, "status": 503, "first": 3, "fraction": "50%", "from": "10s", "until": "40s"}"#
        )
        #expect(fault.name == "api down")
        #expect(fault.match == RequestMatch(host: "*.netcond.test", path: "/api/*", method: "POST"))
        #expect(
            fault.select
                == FaultSelection(first: 3, fraction: Probability(0.5), from: .seconds(10), until: .seconds(40)))
    }

    @Test func profilesCarryFaultsAndPrintThemBack() throws {
        let yaml = """
            extends: 3g
            faults:
              - {match: {path: /orders}, drop_response: true, first: 1}
              - {name: flaky, status: 503, retry_after: 2s, fraction: 20%, from: 1s, until: 2.5s}
              - {match: {host: "origin.netcond.test", method: GET}, truncate_after: 1500B}
            """
        let profile = try ProfileDecoder().decode(yaml: yaml, file: "f.yaml")
        #expect(profile.faults.count == 3)
        #expect(profile.faults[0].action == .dropResponse && profile.faults[0].select.first == 1)
        let again = try ProfileDecoder().decode(yaml: profile.yamlDescription, file: "again.yaml")
        #expect(again == profile)
    }

    @Test func aFileExtendingAnotherInheritsItsFaultsUnlessItGivesItsOwn() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-faults-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "extends: 3g\nfaults: [{status: 500}]\n".write(
            to: directory.appendingPathComponent("base.yaml"), atomically: true, encoding: .utf8)
        let inherits = try ProfileDecoder().decode(
            yaml: "extends: base.yaml\n", file: directory.appendingPathComponent("child.yaml").path)
        #expect(inherits.faults.map(\.action) == [.status(500, retryAfter: nil)])
        let own = try ProfileDecoder().decode(
            yaml: "extends: base.yaml\nfaults: [{drop_response: true}]\n",
            file: directory.appendingPathComponent("own.yaml").path)
        #expect(own.faults.map(\.action) == [.dropResponse])
    }

    @Test(
        arguments: [
            ("{}", "says what to do with none of its keys"),
            ("{status: 503, drop_response: true}", "one fault does one thing"),
            ("{status: 200}", "allowed: 400…599"),
            ("{status: abc}", "allowed: 400…599"),
            ("{first_byte: 30s, retry_after: 5s}", "retry_after goes with status"),
            ("{status: 503, retry_after: 1.5s}", "whole seconds"),
            ("{status: 503, retry_after: tomorrow}", "neither seconds nor an HTTP date"),
            ("{first_byte: 0s}", "allowed: 1ms…1h"),
            ("{first_byte: 2h}", "allowed: 1ms…1h"),
            ("{truncate_after: 10 apples}", "unknown unit 'apples'"),
            ("{drop_response: false}", "does nothing"),
            ("{drop_response: maybe}", "true, false"),
            ("{status: 503, first: 0}", "allowed: 1 or more"),
            ("{status: 503, fraction: 0%}", "hits nothing"),
            ("{status: 503, fraction: 140%}", "more than 100%"),
            ("{status: 503, from: 40s, until: 10s}", "from < until"),
            ("{status: 503, match: {url: /x}}", "'url'"),
            ("{status: 503, match: {path: x/y}}", "does not start with /"),
            ("{status: 503, match: {method: 'PO ST'}}", "is not a method"),
            ("{staus: 503}", "did you mean 'status'"),
            ("{explode: true}", "cut_after"),
            ("{delay: 1s, end: reset}", "end says how a cut ends"),
            ("{cut_after: 1KB, end: rst}", "fin, reset"),
            ("{hang: false}", "does nothing"),
            ("{status: 503, first: 2, requests: [3]}", "first and requests"),
            ("{status: 503, requests: []}", "the list is empty"),
            ("{status: 503, requests: [0]}", "a request number"),
            ("{status: 503, file: a.bin, match: {path: /x}}", "both say which requests"),
        ] as [(String, String)])
    func badFaultsAreRejected(text: String, reason: String) {
        do {
            let fault = try self.fault(text)
            Issue.record("decoded \(fault)")
        } catch {
            #expect(error.file == "fault" && error.line == 1)
            #expect(error.message.contains(reason), "\(error)")
        }
    }

    @Test func theVocabularyReadsEveryAction() throws {
        #expect(try self.fault("{delay: 30s}").action == .delay(.seconds(30)))
        #expect(try self.fault("{cut_after: 100KB}").action == .cut(after: ByteCount(bytes: 100 * 1024), end: .fin))
        #expect(
            try self.fault("{cut_after: 100KB, end: fin}").action
                == .cut(after: ByteCount(bytes: 100 * 1024), end: .fin))
        #expect(try self.fault("{cut_after: 0B, end: reset}").action == .cut(after: ByteCount(bytes: 0), end: .reset))
        #expect(try self.fault("{hang: true}").action == .hang)
        #expect(try self.fault("{drop_response: true, requests: [1, 3]}").select == FaultSelection(requests: [1, 3]))
        // The origin's short forms read in a profile too (paths on the built-in origin).
        #expect(
            try self.fault("{file: big.bin, hang: true}").match == RequestMatch(path: "/files/big.bin", method: "GET"))
        #expect(try self.fault("{api: orders, hang: true}").match == RequestMatch(path: "/api/orders"))
    }

    @Test func theOldSpellingsReadWithANoteNamingTheNewOne() throws {
        let yaml = "faults:\n  - {first_byte: 2s}\n  - {truncate_after: 1KB}\n  - {reset_after: 1KB}\n  - {delay: 2s}\n"
        let (profile, notices) = try ConfigNotices.collecting { () throws(ConfigError) in
            try ProfileDecoder().decode(yaml: yaml, file: "old.yaml")
        }
        #expect(
            profile.faults.map(\.action) == [
                .delay(.seconds(2)), .cut(after: ByteCount(bytes: 1024), end: .fin),
                .cut(after: ByteCount(bytes: 1024), end: .reset),
                .delay(.seconds(2)),
            ])
        #expect(notices.map(\.line) == [2, 3, 4])
        #expect(notices[0].description.hasPrefix("old.yaml:2:"))
        #expect(
            notices[0].message.contains("'first_byte' is the old spelling") && notices[0].message.contains("delay:"))
        #expect(notices[1].message.contains("cut_after:") && notices[2].message.contains("end: reset"))
        // Written back, a profile uses only the new spellings.
        #expect(!profile.yamlDescription.contains("first_byte") && profile.yamlDescription.contains("end: reset"))
    }

    /// Every fault text reads the same as a proxy fault (a profile's `faults:`) and as an origin
    /// fault (a scenario's `origin.faults`).
    @Test(arguments: [
        "{status: 503, retry_after: 2s, first: 3}", "{delay: 45s, from: 1s, until: 9s}",
        "{cut_after: 600KB, requests: [1]}",
        "{cut_after: 1KB, end: reset, fraction: 50%}", "{drop_response: true, match: {method: POST}}", "{hang: true}",
        "{slow_close: 5s, match: {path: /files/*}}", "{file: big.bin, status: 429}",
        "{api: orders, drop_response: true}",
        "{first_byte: 1s}", "{truncate_after: 1KB}", "{reset_after: 1KB}",
    ])
    func bothEndsReadTheSameKeys(text: String) throws {
        let proxy = try ProfileDecoder().decode(yaml: "faults: [\(text)]\n", file: "p.yaml").faults
        let scenario = try ScenarioDecoder.decode(
            yaml:
                "profile: edge\norigin:\n  files: {big.bin: {size: 1MB}}\n  api: {orders: {method: POST}}\n  faults: [\(text)]\n"
                + "checks: {completes: {}}\n",
            file: "s.yaml")
        var expected = proxy
        // In a scenario, `api:` knows the endpoint's method.
        if text.contains("api: orders") { expected[0].match.method = "POST" }
        #expect(scenario.origin.faults == expected)
    }

    @Test func anOriginFaultNamesWhatTheOriginServes() {
        for (faults, reason) in [
            ("[{file: smal.bin, hang: true}]", "did you mean 'small.bin'"),
            ("[{api: order, hang: true}]", "did you mean 'orders'"),
        ] {
            do {
                _ = try ScenarioDecoder.decode(
                    yaml: "profile: edge\norigin:\n  files: {small.bin: {size: 1KB}}\n  api: {orders: {method: POST}}\n"
                        + "  faults: \(faults)\nchecks: {completes: {}}\n",
                    file: "s.yaml")
                Issue.record("decoded \(faults)")
            } catch {
                #expect(error.line == 5 && error.message.contains(reason), "\(error)")
            }
        }
    }

    @Test func errorsInAProfilePointAtTheEntry() {
        self.errors.expectError(
            "faults:\n  - status: 503\n  - {first_byte: 3s, status: 500}\n", at: 3, 30, keyPath: "faults[1].status",
            containing: ["one fault does one thing, and this one already has first_byte"]
        )
    }
}
