import Foundation
import Testing

@testable import NetcondCore

/// `radio:` in profiles and the `radio` check in scenarios: what decodes, and every error's text.
@Suite struct RadioDecodingTests: DecodesProfiles {
    @Test func aModelNameTakesItsPublishedConstants() throws {
        #expect(try self.decode("extends: lte\nradio: lte\n").radio == .defaults(.lte))
        #expect(try self.decode("radio: 3g\n").radio == .defaults(.threeG))
        #expect(try self.decode("radio: 5g\n").radio?.model == .fiveG)
        #expect(try self.decode("radio: wifi\n").radio?.tail == .milliseconds(150))
        #expect(try self.decode("down: {latency: 10ms}\n").radio == nil)
    }

    @Test func aMappingOverridesConstantByConstant() throws {
        let radio = try #require(
            try self.decode(
                "radio: {model: 3g, tail: 6s, promotion: 1.5s, second_tail_power: 300mW, idle_power: 0.01W}\n"
            ).radio)
        var expected = RadioSpec.defaults(.threeG)
        expected.tail = .seconds(6)
        expected.promotion = .milliseconds(1500)
        expected.secondTailPower = Power(milliwatts: 300)
        expected.idlePower = Power(milliwatts: 10)
        #expect(radio == expected)
    }

    @Test func itIsInheritedAndReplacedWhole() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("radio-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "radio: {model: lte, tail: 12s}\n".write(
            toFile: directory + "/base.yaml", atomically: true, encoding: .utf8)
        let inherited = try ProfileDecoder().decode(yaml: "extends: base.yaml\n", file: directory + "/a.yaml")
        #expect(inherited.radio?.tail == .seconds(12))
        let replaced = try ProfileDecoder().decode(
            yaml: "extends: base.yaml\nradio: wifi\n", file: directory + "/b.yaml")
        #expect(replaced.radio == .defaults(.wifi))
    }

    /// `netcond profiles show` (and `netcond ctl profile`, which sends it) writes every constant,
    /// and it reads back the same.
    @Test func itReadsBackFromItsYAML() throws {
        let profile = try self.decode("radio: {model: lte, tail: 12.5s, tail_power: 1.1W, inactivity: 0}\n")
        #expect(profile.yamlDescription.contains("radio: {model: lte, promotion: 260ms, promotion_power: 1.21W"))
        #expect(try self.decode(profile.yamlDescription).radio == profile.radio)
        let threeG = try self.decode("radio: 3g\n")
        #expect(try self.decode(threeG.yamlDescription).radio == .defaults(.threeG))
    }

    @Test func errorsSayWhatIsAllowed() {
        #expect(
            self.error("radio: lt\n")
                == "Profiles/x.yaml:1:8: radio: unknown value 'lt'; did you mean 'lte'? allowed: lte, 3g, 5g, wifi")
        #expect(
            self.error("radio: {tail: 12s}\n")
                == "Profiles/x.yaml:1:8: radio: a radio needs model: (lte, 3g, 5g or wifi), whose published constants the other keys override; e.g. {model: lte, tail: 12s}"
        )
        #expect(
            self.error("radio:\n  model: lte\n  tail_power: 1.06\n")
                == "Profiles/x.yaml:3:15: radio.tail_power: '1.06' has no unit; allowed: watts W or milliwatts mW (e.g. 1.06W, 20mW)"
        )
        #expect(
            self.error("radio:\n  model: lte\n  tail: 2h\n")
                == "Profiles/x.yaml:3:9: radio.tail: 2h is out of range; allowed: 0…1h (e.g. tail: 12s)")
        #expect(
            self.error("radio: {model: lte, tial: 3s}\n")?.contains(
                "radio.tial: unknown key 'tial'; did you mean 'tail'? allowed keys: model, promotion,") == true)
        #expect(
            self.error("radio: [lte]\n")
                == "Profiles/x.yaml:1:8: radio: expected a radio model (lte, 3g, 5g, wifi) or a mapping such as {model: lte, tail: 12s}, found a list"
        )
    }

    /// A route is a path beyond the access link; the radio is the device's.
    @Test func aRouteCannotCarryARadio() {
        let text = self.error("routes:\n  - match: {host: cdn.netcond.test}\n    radio: lte\n")
        #expect(
            text?.contains(
                "routes[0].radio: unknown key 'radio'; the radio is the device's, on the access link every destination shares; write radio: at the profile's top level"
            ) == true, "\(text ?? "decoded")")
    }

    // MARK: - The check

    static func scenario(profile: String, check: String) -> String {
        """
        profile: \(profile)
        origin: {api: {feed: {}}}
        client: {command: "true", url: /api/feed}
        checks:
          radio: \(check)

        """
    }

    @Test func theCheckDecodes() throws {
        let scenario = try ScenarioDecoder.decode(
            yaml: Self.scenario(
                profile: "{extends: lte, radio: lte}", check: "{max_on_share: 40%, max_promotions_per_minute: 2}"),
            file: "s.yaml")
        #expect(scenario.checks == [.radio(RadioCheck(maxOnShare: Probability(0.4), maxPromotionsPerMinute: 2))])
        #expect(scenario.profile.radio == .defaults(.lte))
    }

    @Test func theCheckNeedsALimitAndARadio() {
        func error(_ profile: String, _ check: String) -> String? {
            do {
                _ = try ScenarioDecoder.decode(yaml: Self.scenario(profile: profile, check: check), file: "s.yaml")
                return nil
            } catch {
                return error.description
            }
        }
        #expect(
            error("{extends: lte, radio: lte}", "{}")
                == "s.yaml:5:10: checks.radio: the radio check needs a limit; allowed: max_on_share (e.g. 40%), max_promotions_per_minute (e.g. 2), or both"
        )
        #expect(
            error("lte", "{max_on_share: 40%}")
                == "s.yaml:5:10: checks.radio: the radio check judges the profile's radio, and profile lte has none; allowed: a profile with radio: (e.g. profile: {extends: lte, radio: lte})"
        )
        #expect(
            error("{extends: lte, radio: lte}", "{max_promotions_per_minute: -1}")
                == "s.yaml:5:38: checks.radio.max_promotions_per_minute: '-1' is not a number of promotions a minute; allowed: a number 0…10000 (e.g. 2 or 0.5)"
        )
    }
}
