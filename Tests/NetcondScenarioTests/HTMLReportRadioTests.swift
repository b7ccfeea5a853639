import Foundation
import Testing

@testable import NetcondCore
@testable import NetcondScenario

/// The radio's lane in the HTML report: each state where the JSON report puts it, on the
/// timeline's time axis, and the totals beneath (idle is blank). The browser test
/// (`Tests/loopback/test_radio.py`) looks at the same lane in chromium.
@Suite struct HTMLReportRadioTests {
    /// The fixture's run (4.57 s; the axis ends 2 % later) with an LTE radio woken at 1 s.
    func page(radio: Bool) throws -> String {
        var outcome = ReportFixture.outcome()
        if radio {
            var model = RadioModel(spec: .defaults(.lte))
            model.note(at: Instant(nanoseconds: 1_000_000_000))
            let end = Instant.zero + .seconds(double: outcome.evidence.duration)
            outcome.evidence.radio = RadioReport(
                spec: model.spec, intervals: model.intervals(upTo: end), from: .zero, to: end)
        }
        return try HTMLReport.render(
            json: Data(ScenarioSuite.json([.ran(outcome)], seconds: 4).utf8), source: "r.json")
    }

    @Test func theLaneDrawsEachStateOnTheTimelinesAxis() throws {
        let html = try self.page(radio: true)
        #expect(html.contains(#"<svg class="timeline radio-lane" id="radio-0""#))
        // Promotion from 1 s to 1.26 s, active to 1.36 s, tail to the end; idle before, blank.
        #expect(
            html.contains(
                #"<g class="mark radio-state radio-promotion" data-at="1"><title>+1s–1.26s radio promotion</title>"#))
        // On the timeline's axis: its end, and its left and right edges.
        let timeline = try #require(html.range(of: #"<svg class="timeline" id="timeline-0""#))
        let end = html[timeline.upperBound...].prefix(400).components(separatedBy: "data-end=\"").dropFirst().first?
            .prefix { $0 != "\"" }
        #expect(
            end != nil && html.contains(#"aria-label="radio" data-end="\#(end!)" data-left="250" data-right="1090""#))
        #expect(html.contains(#"<g class="mark radio-state radio-active" data-at="1.26">"#))
        #expect(html.contains(#"<g class="mark radio-state radio-tail" data-at="1.36">"#))
        #expect(!html.contains("radio-idle"))
        #expect(html.contains(##"fill="#e8590c""##) && html.contains(##"fill="#f59f00""##))
        #expect(
            html.contains(
                #"<p class="legend radio-totals">radio (lte): on 3.6 s of 4.6 s (78%), 1 promotion (13.1/min), ≈ 3.9 J"#
            ),
            "\(html.components(separatedBy: "radio-totals").dropFirst().first?.prefix(200) ?? "")")
    }

    /// A report edited by hand may hold any number: the page is drawn, nothing traps.
    @Test func hugeOrOddTotalsAreDrawnWithoutATrap() throws {
        var outcome = ReportFixture.outcome()
        var model = RadioModel(spec: .defaults(.lte))
        model.note(at: Instant(nanoseconds: 1_000_000_000))
        let end = Instant.zero + .seconds(double: outcome.evidence.duration)
        outcome.evidence.radio = RadioReport(
            spec: model.spec, intervals: model.intervals(upTo: end), from: .zero, to: end)
        let json = ScenarioSuite.json([.ran(outcome)], seconds: 4)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        var scenarios = try #require(object["scenarios"] as? [[String: Any]])
        var radio = try #require(scenarios[0]["radio"] as? [String: Any])
        for (share, joules) in [(1e300, 1e300), (-1e300, -1e300), (1e20, 12.5)] {
            radio["onShare"] = share
            radio["joules"] = joules
            scenarios[0]["radio"] = radio
            var edited = object
            edited["scenarios"] = scenarios
            let html = try HTMLReport.render(
                json: try JSONSerialization.data(withJSONObject: edited), source: "edited.json")
            #expect(html.contains("radio-totals"))
        }
    }

    @Test func aRunWithoutARadioHasNoLane() throws {
        let html = try self.page(radio: false)
        #expect(!html.contains("radio-lane") && !html.contains("radio-totals"))
    }
}
