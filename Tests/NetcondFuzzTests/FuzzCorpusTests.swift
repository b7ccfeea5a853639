import Foundation
import Testing

@testable import NetcondFuzzTargets

/// Every input the fuzzers start from or once crashed on, replayed through its target: a crash
/// found by `scripts/fuzz` and saved in `Fuzz/regressions/TARGET/` stays found. (The fuzzing itself
/// is `scripts/fuzz`; `scripts/test` runs each target briefly.)
@Suite struct FuzzCorpusTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func files(in folder: String) -> [URL] {
        let url = Self.root.appendingPathComponent(folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.sorted().map { url.appendingPathComponent($0) }
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func everySeedAndRegressionRunsThrough(target: String) throws {
        let run = try #require(FuzzTargets.named(target))
        let seeds = Self.files(in: "Fuzz/seeds/\(target)")
        #expect(!seeds.isEmpty, "Fuzz/seeds/\(target) is empty")
        for file in seeds + Self.files(in: "Fuzz/regressions/\(target)") {
            run(Array(try Data(contentsOf: file)))
        }
    }

    /// The inputs that broke netcond before these targets existed, one per target where there was one.
    @Test func theAuditsInputsRunThrough() {
        FuzzTargets.named("trace")!(Array("0, 1mbit, 20ms, 0%\n1e10, 2mbit, 20ms, 0%\n".utf8))
        FuzzTargets.named("control-api")!(
            Array(
                #"POST /profile\#n{"yaml": "name: x\ndown: {trace: {source: t, series: \"0, 1mbit, 1ms, 0%; 1e308, 1mbit, 1ms, 0%\"}}\n"}"#
                    .utf8))
        var bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n"
        for (name, previous) in zip(
            ["b", "c", "d", "e", "f", "g", "h", "i"], ["a", "b", "c", "d", "e", "f", "g", "h"])
        {
            bomb += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ",") + "]\n"
        }
        FuzzTargets.named("profile")!(Array(bomb.utf8))
        FuzzTargets.named("scenario")!(Array(bomb.utf8))
    }

    /// The shipped profiles, scenarios and traces are seeds too (scripts/fuzz copies them in).
    @Test func theShippedFilesRunThrough() throws {
        for file in Self.files(in: "Profiles") where file.pathExtension == "yaml" {
            FuzzTargets.named("profile")!(Array(try Data(contentsOf: file)))
        }
        for file in Self.files(in: "Scenarios") where file.pathExtension == "yaml" {
            FuzzTargets.named("scenario")!(Array(try Data(contentsOf: file)))
        }
    }
}
