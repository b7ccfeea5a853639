// Writes the Swift file that gives `netcond --version` its git revision: run at build time by the
// NetcondRevision plugin as `netcond-revision PACKAGE_DIRECTORY OUTPUT_FILE`. Reads the repository's
// files itself (HEAD, the branch's ref, packed-refs), so it needs no git program; outside a git
// checkout (a source archive) the revision is "unknown".
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: netcond-revision PACKAGE_DIRECTORY OUTPUT_FILE\n".utf8))
    exit(2)
}

func read(_ path: String) -> String? {
    (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The folder holding HEAD: `.git`, or where a `.git` file (a worktree, a submodule) points.
func gitDirectory(_ package: String) -> String? {
    let dotGit = package + "/.git"
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: dotGit, isDirectory: &isDirectory) else { return nil }
    if isDirectory.boolValue { return dotGit }
    guard let line = read(dotGit), line.hasPrefix("gitdir:") else { return nil }
    let path = line.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespaces)
    return path.hasPrefix("/") ? path : package + "/" + path
}

func revision(_ package: String) -> String? {
    guard let git = gitDirectory(package), let head = read(git + "/HEAD") else { return nil }
    guard head.hasPrefix("ref:") else { return head }  // detached: HEAD holds the commit
    let ref = head.dropFirst("ref:".count).trimmingCharacters(in: .whitespaces)
    // A worktree keeps its refs in the common folder.
    let common = read(git + "/commondir").map { $0.hasPrefix("/") ? $0 : git + "/" + $0 } ?? git
    for folder in [git, common] {
        if let commit = read(folder + "/" + ref) { return commit }
    }
    for line in (read(common + "/packed-refs") ?? "").split(separator: "\n") {
        let fields = line.split(separator: " ")
        if fields.count == 2, fields[1] == ref { return String(fields[0]) }
    }
    return nil
}

let commit = revision(arguments[1]).flatMap {
    $0.count >= 12 && $0.allSatisfy(\.isHexDigit) ? String($0.prefix(12)) : nil
}
let text = """
    // Generated at build time by the NetcondRevision plugin; not in git.
    /// The git commit this netcond was built from (12 hex digits), or "unknown".
    let buildRevision = "\(commit ?? "unknown")"

    """
let output = arguments[2]
if read(output).map({ $0 + "\n" }) != text {
    do {
        try text.write(toFile: output, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("netcond-revision: cannot write \(output): \(error)\n".utf8))
        exit(1)
    }
}
