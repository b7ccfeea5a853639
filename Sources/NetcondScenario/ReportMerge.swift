import Foundation

/// `netcond report merge`: the JSON reports of a sharded run's parts joined into the one report the
/// whole run would have written (its scenarios in order of name, its verdict the conjunction of
/// theirs, its time the longest part's: the parts ran side by side).
public enum ReportMerge {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Merges reports given as (path, contents); the error names the file and what is wrong.
    public static func merge(_ reports: [(path: String, data: Data)]) throws(Failure) -> String {
        guard !reports.isEmpty else { throw Failure(description: "no report to merge; give the parts' JSON reports") }
        var scenarios: [[String: Any]] = []
        var seenIn: [String: String] = [:]
        var passed = true
        var seconds = 0.0
        var parts: [String] = []
        for (path, data) in reports {
            let object: Any
            do {
                object = try JSONSerialization.jsonObject(with: data)
            } catch {
                throw Failure(description: "\(path): not JSON (\(Self.reason(error))); a netcond JSON report is written by netcond test --json")
            }
            guard let report = object as? [String: Any], let list = report["scenarios"] as? [[String: Any]],
                report["passed"] is Bool
            else {
                throw Failure(description: "\(path): not a netcond JSON report (no \"scenarios\" list and \"passed\"); it is written by netcond test --json")
            }
            let format = report["format"] as? Int
            guard format == ScenarioSuite.JSONReport.currentFormat else {
                let found = format.map { "format \($0)" } ?? "no format (an older netcond)"
                throw Failure(description: "\(path): a report of \(found); this netcond reads format \(ScenarioSuite.JSONReport.currentFormat): run the parts again with this netcond")
            }
            for scenario in list {
                guard let name = scenario["name"] as? String, scenario["verdict"] is String else {
                    throw Failure(description: "\(path): a scenario without a name or verdict: the file is damaged")
                }
                if let other = seenIn[name] {
                    throw Failure(description: "scenario '\(name)' is in both \(other) and \(path): the same part twice, or parts of different runs")
                }
                seenIn[name] = path
                scenarios.append(scenario)
            }
            passed = passed && (report["passed"] as? Bool ?? false)
            seconds = max(seconds, report["seconds"] as? Double ?? 0)
            if let shard = report["shard"] as? String { parts.append(shard) }
        }
        let counts = Set(parts.map(Self.partCount))
        if counts.count > 1 {
            throw Failure(description: "the reports are parts of different splits (\(parts.joined(separator: ", "))): merge the parts of one run")
        }
        if !parts.isEmpty && parts.count < reports.count {
            throw Failure(description: "some reports are parts of a sharded run (\(parts.sorted().joined(separator: ", "))) and some are whole runs: merge the parts of one run")
        }
        if let count = counts.first {
            // A part that is not here (its CI job died before writing its report) would make the
            // merged report a verdict on fewer scenarios than the run has: refused, naming it.
            let given = Set(parts.map(Self.partIndex))
            if given.count < parts.count {
                throw Failure(description: "a part is given twice (\(parts.sorted().joined(separator: ", "))): merge each part once")
            }
            let missing = (1...count).filter { !given.contains($0) }
            if !missing.isEmpty {
                let names = missing.map { "\($0)/\(count)" }.joined(separator: ", ")
                throw Failure(description: "part\(missing.count == 1 ? "" : "s") \(names) of the run \(missing.count == 1 ? "is" : "are") missing: the merged report would judge only some of its scenarios; give every part's report")
            }
        }
        scenarios.sort { ($0["name"] as? String ?? "") < ($1["name"] as? String ?? "") }
        var merged: [String: Any] = [
            "format": ScenarioSuite.JSONReport.currentFormat, "passed": passed, "seconds": seconds, "scenarios": scenarios,
        ]
        if !parts.isEmpty { merged["merged"] = parts.sorted { Self.partIndex($0) < Self.partIndex($1) } }
        guard let data = try? JSONSerialization.data(withJSONObject: merged, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        else { throw Failure(description: "cannot write the merged report") }
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    private static func partIndex(_ part: String) -> Int { Int(part.split(separator: "/").first ?? "") ?? 0 }
    private static func partCount(_ part: String) -> Int { Int(part.split(separator: "/").last ?? "") ?? 0 }

    private static func reason(_ error: Error) -> String {
        let text = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
        return text ?? "it does not parse"
    }
}
