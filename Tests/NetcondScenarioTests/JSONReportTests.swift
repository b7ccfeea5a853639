import Foundation
import NetcondCore
import Testing

@testable import NetcondScenario

/// The JSON report read back into the types that wrote it: what netcond writes reads and writes
/// again to the same bytes, the bytes are those netcond wrote before its reader was typed, and a
/// merged report (or a trimmed or hand-made one) still reads.
@Suite struct JSONReportTests {
    typealias Report = ScenarioSuite.JSONReport

    /// The fixture's reports as the untyped writer and merge wrote them (before the report was
    /// `Codable` both ways), kept in Tests/golden.
    static func golden(_ name: String) throws -> String {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("golden")
        return try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
    }

    @Test func aReportReadsAndWritesAgainToTheSameBytes() throws {
        for shard in [nil, try ScenarioShard(parsing: "2/3")] {
            let json = ScenarioSuite.json(ReportFixture.results(), seconds: 4.5, shard: shard)
            let report = try Report.read(Data(json.utf8))
            #expect(report.text == json)
            #expect(try Report.read(Data(report.text.utf8)) == report)
        }
    }

    @Test func theBytesAreTheFormatNetcondWroteBefore() throws {
        let json = ScenarioSuite.json(ReportFixture.results(), seconds: 4.5, shard: try ScenarioShard(parsing: "2/3"))
        #expect(json == (try Self.golden("report.json")))
    }

    @Test func theTypesHoldWhatTheRunSaid() throws {
        let report = try Report.read(Data(ScenarioSuite.json(ReportFixture.results(), seconds: 4.5).utf8))
        let ran = try #require(report.scenarios.first)
        #expect(ran.verdict == .failed && report.scenarios.last?.verdict == .error)
        #expect(ran.seed == UInt64.max, "a seed past 2^53 is kept exactly")
        #expect(ran.events?.map(\.kind) == [.link, .link, .fault, .captive, .link])
        #expect(ran.attempts?.map(\.outcome) == [.timedOut, .refused])
        #expect(ran.requests?[1].linkCut == .reset && ran.requests?[1].bodyBytesReceived == 1_097_152)
        #expect(ran.requests?[3].stoppedByRunEnd == true && ran.requests?[3].status == nil)
        #expect(ran.link?.map(\.rate) == [2_000_000, nil, nil])
        #expect(ran.delivered?.last == Report.Scenario.Delivered(at: 4.568, bytes: 1_097_152))
        #expect(ran.checks?.last?.caveat == "not exact through the proxy")
        // The page repeats the run with that seed (read as a double, it once said 18446744073709551616.).
        let html = try HTMLReport.render(json: Data(report.text.utf8), source: "r.json")
        #expect(html.contains("--seed 18446744073709551615 -- curl") && html.contains("<td>18446744073709551615</td>"))
    }

    /// A report `netcond report merge` wrote before the reader was typed: it reads, draws, and
    /// merged again (as one part) keeps its scenarios and verdict.
    @Test func aMergedReportOfBeforeStillReads() throws {
        let merged = try Self.golden("merged.json")
        let report = try Report.read(Data(merged.utf8), needsPassed: true)
        #expect(report.merged == ["1/2", "2/2"] && report.shard == nil)
        #expect(report.scenarios.map(\.name) == ["a-first", "broken \"one\"", "every-field"])
        let html = try HTMLReport.render(json: Data(merged.utf8), source: "merged.json")
        #expect(html.components(separatedBy: #"<section class="scenario""#).count - 1 == 3)
        let again = try ReportMerge.merge([("merged.json", Data(merged.utf8))])
        let reread = try Report.read(Data(again.utf8))
        #expect(reread.scenarios == report.scenarios)
        #expect(reread.passed == report.passed && reread.seconds == report.seconds)
    }

    /// The parts merged now are the bytes the untyped merge wrote.
    @Test func theMergeWritesWhatItWroteBefore() throws {
        let results = ReportFixture.results()
        let part1 = ScenarioSuite.json(
            [.ran(ReportFixture.outcome())], seconds: 3, shard: try ScenarioShard(parsing: "1/2"))
        var other = ReportFixture.outcome()
        other.scenario.name = "a-first"
        let part2 = ScenarioSuite.json(
            [.ran(other), results[1]], seconds: 4.25, shard: try ScenarioShard(parsing: "2/2"))
        let merged = try ReportMerge.merge([("2.json", Data(part2.utf8)), ("1.json", Data(part1.utf8))])
        #expect(merged == (try Self.golden("merged.json")))
    }

    /// The merge writes what the whole run's report would: the same encoder, the same bytes for
    /// the same scenarios.
    @Test func theMergeWritesTheReportsOwnFormat() throws {
        let part = ScenarioSuite.json(ReportFixture.results(), seconds: 4.5, shard: try ScenarioShard(parsing: "1/1"))
        let merged = try ReportMerge.merge([("1.json", Data(part.utf8))])
        let whole = ScenarioSuite.json(ReportFixture.results(), seconds: 4.5)
        var expected = try Report.read(Data(whole.utf8))
        expected.merged = ["1/1"]
        expected.scenarios.sort { $0.name < $1.name }
        #expect(merged == expected.text)
        #expect(merged.contains("\"merged\" : [\n    \"1/1\"\n  ],\n  \"passed\" : false"))
    }

    /// The host each request asked for is in the report, and the page names it in the request's
    /// label once the run's requests went to more than one host (with one, the label is as before).
    @Test func theHostsTheRequestsAskedForAreInTheReportAndThePage() throws {
        var outcome = ReportFixture.outcome()
        for index in outcome.evidence.requests.indices {
            outcome.evidence.requests[index].host = index == 1 ? "cdn.netcond.test" : "origin.netcond.test"
        }
        let json = ScenarioSuite.json([.ran(outcome)], seconds: 4.5)
        let report = try Report.read(Data(json.utf8))
        #expect(report.scenarios.first?.requests?.map(\.host) == outcome.evidence.requests.map(\.host))
        #expect(json.contains("\"host\" : \"cdn.netcond.test\""))
        let html = try HTMLReport.render(json: Data(json.utf8), source: "r.json")
        #expect(html.contains(">cdn.netcond.test GET /files/big.bin 206"))
        #expect(html.contains("GET cdn.netcond.test/files/big.bin → 206"))
        for index in outcome.evidence.requests.indices { outcome.evidence.requests[index].host = "origin.netcond.test" }
        let one = try HTMLReport.render(json: Data(ScenarioSuite.json([.ran(outcome)], seconds: 4.5).utf8), source: "r")
        #expect(!one.contains(">origin.netcond.test GET") && one.contains(">GET /files/big.bin 206"))
    }

    /// What a hand-made or trimmed report may leave out: a scenario's file and profile, a check's
    /// details and marks, a link row's loss.
    @Test func aTrimmedReportReads() throws {
        let text =
            #"{"format": 2, "passed": false, "seconds": 1, "scenarios": [{"name": "x", "verdict": "failed", "#
            + #""checks": [{"name": "completes", "passed": false, "evidence": "e"}], "link": [[0, null, 10]]}]}"#
        let report = try Report.read(Data(text.utf8))
        let scenario = try #require(report.scenarios.first)
        #expect(scenario.file == nil && scenario.checks?.first?.details == [] && scenario.checks?.first?.marks == [])
        #expect(scenario.link == [Report.Scenario.LinkRow(at: 0, rate: nil, delay: 10, loss: 0)])
    }

    /// A value netcond never writes there is named, with where it is.
    @Test func aValueOfTheWrongKindIsNamedWithItsPlace() {
        let text =
            #"{"format": 2, "passed": false, "seconds": 1, "scenarios": [{"name": "x", "verdict": "failed", "#
            + #""events": [{"at": 1, "kind": "weather", "detail": "rain"}]}]}"#
        #expect(throws: Report.ReadFailure.self) { try Report.read(Data(text.utf8)) }
        do {
            _ = try HTMLReport.render(json: Data(text.utf8), source: "hand.json")
            Issue.record("drawn")
        } catch {
            let said = "hand.json: not a report this netcond wrote (scenarios[0].events[0].kind"
            #expect(error.description.hasPrefix(said), "\(error)")
        }
    }
}
