import Foundation
import Testing

@testable import NetcondScenario

/// `netcond test --shard I/N` and `netcond report merge`: every scenario in exactly one part, the
/// same parts whatever the order they are found in, parts of about the same length, and the parts'
/// reports joined back into one.
@Suite struct ShardAndMergeTests {
    /// (name, deadline in seconds)
    static let suite: [(String, Double)] = [
        ("a", 40), ("b", 30), ("c", 30), ("d", 60), ("e", 20), ("f", 40), ("g", 90), ("h", 30), ("i", 45), ("j", 30),
        ("k", 40), ("l", 25),
    ]

    static func parts(_ items: [(String, Double)], _ count: Int) -> [[String]] {
        (1...count).map { index in
            let shard = try! ScenarioShard(parsing: "\(index)/\(count)")
            return shard.select(items, name: { $0.0 }, weight: { $0.1 }).map(\.0)
        }
    }

    @Test(arguments: [1, 2, 3, 5, 12, 20])
    func everyScenarioIsInExactlyOnePart(count: Int) {
        let parts = Self.parts(Self.suite, count)
        let all = parts.flatMap { $0 }
        #expect(all.count == Self.suite.count)
        #expect(Set(all) == Set(Self.suite.map(\.0)))
    }

    @Test func thePartsDoNotDependOnTheOrderScenariosAreFoundIn() {
        let shuffled = Array(Self.suite.reversed().dropFirst(6) + Self.suite.reversed().prefix(6))
        #expect(Self.parts(Self.suite, 3).map(Set.init) == Self.parts(shuffled, 3).map(Set.init))
    }

    @Test func partsAreBalancedByDeadline() {
        let weights = Dictionary(uniqueKeysWithValues: Self.suite)
        let loads = Self.parts(Self.suite, 3).map { $0.reduce(0) { $0 + weights[$1]! } }
        // 480 s in all: 160 each at best; no part more than the longest scenario (90 s) above that.
        #expect(loads.max()! - loads.min()! <= 90)
        #expect(loads.max()! <= 170, "\(loads)")
    }

    @Test(arguments: ["0/3", "4/3", "a/b", "3", "1/0", "1/3/5", "-1/3", "1/1001", ""])
    func badShardsAreRefusedWithTheAllowedForm(text: String) {
        #expect(throws: ScenarioRunError.self) { try ScenarioShard(parsing: text) }
        do {
            _ = try ScenarioShard(parsing: text)
        } catch {
            #expect(error.exitCode == 2 && error.description.contains("allowed: I/N"))
        }
    }

    static func report(_ names: [String], passed: Bool, shard: String?, format: Int? = 2) -> Data {
        var object: [String: Any] = [
            "passed": passed, "seconds": 10.0,
            "scenarios": names.map { ["name": $0, "verdict": passed ? "passed" : "failed"] },
        ]
        if let format { object["format"] = format }
        if let shard { object["shard"] = shard }
        return try! JSONSerialization.data(withJSONObject: object)
    }

    @Test func mergedPartsAreOneReport() throws {
        let merged = try ReportMerge.merge([
            ("2.json", Self.report(["c", "a"], passed: false, shard: "2/2")),
            ("1.json", Self.report(["b"], passed: true, shard: "1/2")),
        ])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(merged.utf8)) as? [String: Any])
        #expect((object["scenarios"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["a", "b", "c"])
        #expect(object["passed"] as? Bool == false)
        #expect(object["merged"] as? [String] == ["1/2", "2/2"])
        #expect(object["format"] as? Int == 2)
    }

    @Test func whatCannotBeMergedIsRefusedNamingTheFile() {
        func failure(_ reports: [(String, Data)]) -> String {
            do {
                _ = try ReportMerge.merge(reports.map { (path: $0.0, data: $0.1) })
                return ""
            } catch {
                return error.description
            }
        }
        #expect(failure([("x.json", Data("{\"passed\": tr".utf8))]).hasPrefix("x.json: not JSON"))
        #expect(failure([("y.json", Data("[1, 2]".utf8))]).hasPrefix("y.json: not a netcond JSON report"))
        #expect(
            failure([("old.json", Self.report(["a"], passed: true, shard: nil, format: nil))]).contains(
                "no format (an older netcond)"))
        #expect(failure([("new.json", Self.report(["a"], passed: true, shard: nil, format: 7))]).contains("format 7"))
        #expect(
            failure([
                ("1.json", Self.report(["a"], passed: true, shard: "1/2")),
                ("again.json", Self.report(["a"], passed: true, shard: "1/2")),
            ]).contains("'a' is in both 1.json and again.json"))
        #expect(
            failure([
                ("1.json", Self.report(["a"], passed: true, shard: "1/2")),
                ("2.json", Self.report(["b"], passed: true, shard: "2/3")),
            ]).contains("different splits"))
        #expect(failure([]).contains("no report"))
        #expect(
            failure([
                ("1.json", Self.report(["a"], passed: true, shard: "1/3")),
                ("3.json", Self.report(["c"], passed: true, shard: "3/3")),
            ]).contains("part 2/3 of the run is missing"))
        #expect(
            failure([
                ("1.json", Self.report(["a"], passed: true, shard: "1/2")),
                ("all.json", Self.report(["b"], passed: true, shard: nil)),
            ]).contains("some are whole runs"))
        #expect(
            failure([
                ("1.json", Self.report(["a"], passed: true, shard: "1/2")),
                ("1b.json", Self.report(["b"], passed: true, shard: "1/2")),
            ]).contains("a part is given twice"))
    }
}
