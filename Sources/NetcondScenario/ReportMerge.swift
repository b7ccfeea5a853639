import Foundation

/// `netcond report merge`: the JSON reports of a sharded run's parts joined into the one report the
/// whole run would have written (its scenarios in order of name, its verdict the conjunction of
/// theirs, its time the longest part's: the parts ran side by side).
public enum ReportMerge {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    typealias Report = ScenarioSuite.JSONReport

    /// Merges reports given as (path, contents); the error names the file and what is wrong.
    public static func merge(_ reports: [(path: String, data: Data)]) throws(Failure) -> String {
        guard !reports.isEmpty else { throw Failure(description: "no report to merge; give the parts' JSON reports") }
        var scenarios: [Report.Scenario] = []
        var seenIn: [String: String] = [:]
        var passed = true
        var seconds = 0.0
        var parts: [String] = []
        for (path, data) in reports {
            let report = try Self.read(data, path: path)
            for scenario in report.scenarios {
                if let other = seenIn[scenario.name] {
                    throw Failure(
                        description: "scenario '\(scenario.name)' is in both \(other) and \(path): "
                            + "the same part twice, or parts of different runs")
                }
                seenIn[scenario.name] = path
                scenarios.append(scenario)
            }
            passed = passed && report.passed
            seconds = max(seconds, report.seconds)
            if let shard = report.shard { parts.append(shard) }
        }
        try Self.checkParts(parts, reports: reports.count)
        scenarios.sort { $0.name < $1.name }
        let joined = parts.isEmpty ? nil : parts.sorted { Self.partIndex($0) < Self.partIndex($1) }
        let merged = Report(
            format: Report.currentFormat, passed: passed, seconds: seconds, shard: nil, merged: joined,
            scenarios: scenarios)
        return merged.text
    }

    /// One part's report, or why it cannot be merged.
    private static func read(_ data: Data, path: String) throws(Failure) -> Report {
        do {
            return try Report.read(data, needsPassed: true)
        } catch {
            switch error {
            case .notJSON(let reason):
                throw Failure(
                    description: "\(path): not JSON (\(reason ?? "it does not parse")); "
                        + "a netcond JSON report is written by netcond test --json")
            case .notAReport:
                throw Failure(
                    description: "\(path): not a netcond JSON report (no \"scenarios\" list and \"passed\"); "
                        + "it is written by netcond test --json")
            case .format(let format):
                let found = format.map { "format \($0)" } ?? "no format (an older netcond)"
                throw Failure(
                    description: "\(path): a report of \(found); this netcond reads format "
                        + "\(Report.currentFormat): run the parts again with this netcond")
            case .damaged(let what):
                throw Failure(description: "\(path): \(what): the file is damaged")
            }
        }
    }

    /// The parts given are the whole of one split run, each once (or none is a part).
    private static func checkParts(_ parts: [String], reports: Int) throws(Failure) {
        let counts = Set(parts.map(Self.partCount))
        if counts.count > 1 {
            throw Failure(
                description: "the reports are parts of different splits (\(parts.joined(separator: ", "))): "
                    + "merge the parts of one run")
        }
        if !parts.isEmpty && parts.count < reports {
            let sorted = parts.sorted().joined(separator: ", ")
            throw Failure(
                description: "some reports are parts of a sharded run (\(sorted)) "
                    + "and some are whole runs: merge the parts of one run")
        }
        guard let count = counts.first else { return }
        // A part that is not here (its CI job died before writing its report) would make the
        // merged report a verdict on fewer scenarios than the run has: refused, naming it.
        let given = Set(parts.map(Self.partIndex))
        if given.count < parts.count {
            throw Failure(
                description: "a part is given twice (\(parts.sorted().joined(separator: ", "))): merge each part once")
        }
        let missing = (1...count).filter { !given.contains($0) }
        if !missing.isEmpty {
            let names = missing.map { "\($0)/\(count)" }.joined(separator: ", ")
            let one = missing.count == 1
            throw Failure(
                description: "part\(one ? "" : "s") \(names) of the run \(one ? "is" : "are") missing: "
                    + "the merged report would judge only some of its scenarios; give every part's report")
        }
    }

    private static func partIndex(_ part: String) -> Int { Int(part.split(separator: "/").first ?? "") ?? 0 }
    private static func partCount(_ part: String) -> Int { Int(part.split(separator: "/").last ?? "") ?? 0 }
}
