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
        #expect(try self.fault("{first_byte: 30s}").action == .firstByte(.seconds(30)))
        #expect(try self.fault("{truncate_after: 100KB}").action == .truncateAfter(ByteCount(bytes: 100 * 1024)))
        #expect(try self.fault("{reset_after: 1MB}").action == .resetAfter(ByteCount(bytes: 1024 * 1024)))
        #expect(try self.fault("{drop_response: true}").action == .dropResponse)
        #expect(try self.fault("{slow_close: 10s}").action == .slowClose(.seconds(10)))
    }

    @Test func matchersAndSelectors() throws {
        let fault = try self.fault(
            #"{"name": "api down", "match": {"host": "*.netcond.test", "path": "/api/*", "method": "post"}, "status": 503, "first": 3, "fraction": "50%", "from": "10s", "until": "40s"}"#
        )
        #expect(fault.name == "api down")
        #expect(fault.match == RequestMatch(host: "*.netcond.test", path: "/api/*", method: "POST"))
        #expect(fault.select == FaultSelection(first: 3, fraction: Probability(0.5), from: .seconds(10), until: .seconds(40)))
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
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-faults-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "extends: 3g\nfaults: [{status: 500}]\n".write(to: directory.appendingPathComponent("base.yaml"), atomically: true, encoding: .utf8)
        let inherits = try ProfileDecoder().decode(yaml: "extends: base.yaml\n", file: directory.appendingPathComponent("child.yaml").path)
        #expect(inherits.faults.map(\.action) == [.status(500, retryAfter: nil)])
        let own = try ProfileDecoder().decode(
            yaml: "extends: base.yaml\nfaults: [{drop_response: true}]\n", file: directory.appendingPathComponent("own.yaml").path)
        #expect(own.faults.map(\.action) == [.dropResponse])
    }

    @Test(arguments: [
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
        ("{explode: true}", "first_byte"),
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

    @Test func errorsInAProfilePointAtTheEntry() {
        self.errors.expectError(
            "faults:\n  - status: 503\n  - {first_byte: 3s, status: 500}\n", at: 3, 30, keyPath: "faults[1].status",
            containing: ["one fault does one thing, and this one already has first_byte"]
        )
    }
}
