import Testing

@testable import NetcondCore

/// A timeline's `handover:` and the `reconnects` check as a scenario file writes them, and what a
/// wrong one says.
@Suite struct HandoverDecodingTests {
    static let file = "Scenarios/handover.yaml"

    func decode(_ yaml: String) throws(ConfigError) -> Scenario {
        try ScenarioDecoder.decode(yaml: yaml, file: Self.file)
    }

    @Test func aHandoverAndTheCheckDecode() throws {
        let scenario = try self.decode(
            """
            profile: wifi
            timeline:
              - {after_bytes: 512KB, handover: {to: lte, gap: 2s}}
              - {at: 30s, handover: 3g}
              - {at: 40s, handover: {to: {extends: lte, faults: [{name: busy, status: 503}]}}}
              - {at: 41s, remove_fault: busy}
            checks: {reconnects: {within: 5s, resume: false}, completes: {}}
            """)
        guard case .handover(let lte, let gap) = scenario.timeline[0].action else {
            Issue.record("not a handover: \(scenario.timeline[0].action)")
            return
        }
        #expect(lte.name == "lte" && gap == .seconds(2))
        #expect(scenario.timeline[0].action.description == "handover → lte after 2s")
        guard case .handover(let threeG, let none) = scenario.timeline[1].action else {
            Issue.record("not a handover")
            return
        }
        #expect(threeG.name == "3g" && none == .zero)
        #expect(scenario.checks.first == .reconnects(ReconnectsCheck(within: .seconds(5), resume: false)))
        // The default: 10 s, resuming.
        let plain = try self.decode("profile: wifi\ntimeline: [{at: 1s, handover: lte}]\nchecks: {reconnects: {}}\n")
        #expect(plain.checks == [.reconnects(ReconnectsCheck(within: .seconds(10), resume: true))])
    }

    @Test(
        arguments: [
            ("{at: 1s, handover: {gap: 2s}}", 3, "a handover needs to:"),
            ("{at: 1s, handover: {to: lte, gap: 2h}}", 3, "0s…1h"),
            ("{at: 1s, handover: {to: lte, gapp: 2s}}", 3, "did you mean 'gap'"),
            ("{at: 1s, handover: {to: lte}, outage: refuse}", 3, "outage"),
            ("{at: 1s, handover: ltee}", 3, "did you mean 'lte'"),
        ] as [(String, Int, String)])
    func aWrongHandoverSaysWhatAndWhere(event: String, line: Int, message: String) {
        let yaml = "profile: wifi\ntimeline:\n  - \(event)\nchecks: {completes: {}}\n"
        let error = #expect(throws: ConfigError.self) { try self.decode(yaml) }
        #expect(error?.file == Self.file)
        #expect(error?.line == line, "\(error?.description ?? "")")
        #expect(error?.description.contains(message) == true, "\(error?.description ?? "")")
    }

    @Test func aReconnectsCheckWithoutAHandoverIsRefused() {
        let error = #expect(throws: ConfigError.self) {
            try self.decode("profile: wifi\nchecks: {completes: {}, reconnects: {}}\n")
        }
        #expect(error?.line == 2, "\(error?.description ?? "")")
        #expect(error?.description.contains("the timeline has none") == true, "\(error?.description ?? "")")
    }

    @Test func aWrongCheckSaysWhatIsAllowed() {
        let error = #expect(throws: ConfigError.self) {
            try self.decode("profile: wifi\nchecks: {reconnects: {within: 0s, resume: maybe}}\n")
        }
        #expect(error?.description.contains("1ms…1h") == true, "\(error?.description ?? "")")
        let resume = #expect(throws: ConfigError.self) {
            try self.decode("profile: wifi\nchecks: {reconnects: {resume: maybe}}\n")
        }
        #expect(resume?.description.contains("true, false") == true, "\(resume?.description ?? "")")
    }
}
