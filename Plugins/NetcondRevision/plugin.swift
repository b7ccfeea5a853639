import Foundation
import PackagePlugin

/// Gives the `netcond` target the git revision it is built from (`netcond --version`): runs
/// `netcond-revision` whenever the checkout's HEAD, its branch's ref or packed-refs change.
@main
struct NetcondRevision: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let package = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildRevision.swift")
        var inputs: [URL] = []
        let git = package.appending(path: ".git")
        for name in ["HEAD", "packed-refs"] {
            let file = git.appending(path: name)
            if FileManager.default.fileExists(atPath: file.path) { inputs.append(file) }
        }
        if let head = try? String(contentsOf: git.appending(path: "HEAD"), encoding: .utf8), head.hasPrefix("ref:") {
            let ref = head.dropFirst("ref:".count).trimmingCharacters(in: .whitespacesAndNewlines)
            let file = git.appending(path: ref)
            if FileManager.default.fileExists(atPath: file.path) { inputs.append(file) }
        }
        return [
            .buildCommand(
                displayName: "Reading the git revision for netcond --version",
                executable: try context.tool(named: "netcond-revision").url,
                arguments: [package.path, output.path],
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
