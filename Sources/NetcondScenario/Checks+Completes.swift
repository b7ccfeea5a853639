import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// `completes`: the client exited 0 before its deadline and its named output files hold the
/// origin's bytes; and the safe reading of a client's files.
/// Where a client's files are, and whose they must be (nil: netcond's own user ran it).
struct ClientFolder: Sendable, Equatable {
    var path: String
    var owner: UInt32?
}

extension RunEvidence {
    var clientFolder: ClientFolder { ClientFolder(path: self.workingDirectory, owner: self.clientUser) }
}

extension Checks {

    static func completes(_ check: CompletesCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "completes"
        if evidence.timedOut {
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "still running at its \(formatSeconds(evidence.deadline)) deadline; stopped (need exit \(check.exit) before it)"
            )
        }
        guard let exit = evidence.exit else {
            return CheckResult(name: name, passed: false, evidence: "the client did not run")
        }
        let ended = "after \(Self.seconds(evidence.duration))"
        guard exit == .exited(check.exit) else {
            return CheckResult(
                name: name, passed: false,
                evidence: "\(Self.describe(exit)) \(ended) (need exit \(check.exit))\(Self.askedForIPv4(evidence))")
        }
        var details: [String] = []
        var failure: String?
        if let endpoint = check.endpoint {
            let answer = Self.lastAnswer(from: endpoint, evidence)
            details.append(answer.text)
            if !answer.succeeded { failure = answer.text }
        }
        for (output, fileName) in check.files.map({ ($0.output, $0.file) }) {
            guard let file = evidence.origin.file(named: fileName) else { continue }
            let verdict = Self.compare(
                path: (evidence.workingDirectory as NSString).appendingPathComponent(output), in: evidence.clientFolder,
                with: file)
            details.append("\(output): \(verdict.text)")
            if !verdict.identical && failure == nil { failure = "\(output): \(verdict.text)" }
        }
        if let failure {
            return CheckResult(
                name: name, passed: false, evidence: "exit \(exit.shellCode) \(ended), but \(failure)", details: details
            )
        }
        let files = details.isEmpty ? "" : "; " + details.joined(separator: "; ")
        return CheckResult(name: name, passed: true, evidence: "exit \(check.exit) \(ended)\(files)", details: details)
    }

    /// On an IPv6-only network, what the client did that needed IPv4 (nothing: empty): its
    /// lookups that asked for an IPv4 address alone, its connects to an IPv4 address.
    static func askedForIPv4(_ evidence: RunEvidence) -> String {
        var parts: [String] = []
        for (outcome, what) in [
            (AttemptOutcome.noIPv4Address, "asked only for an IPv4 address (an A record, which DNS64 does not give)"),
            (.noIPv4Route, "connected to an IPv4 address (there is no IPv4 route)"),
        ] {
            let attempts = evidence.failedConnects.filter { $0.outcome == outcome }
            guard let first = attempts.first else { continue }
            let port = first.port > 0 ? ":\(first.port)" : ""
            let times = attempts.count == 1 ? "" : " (×\(attempts.count))"
            parts.append("\(what): \(first.host)\(port) at +\(Self.seconds(first.at))\(times)")
        }
        return parts.isEmpty ? "" : "; on this IPv6-only network it " + parts.joined(separator: "; it ")
    }

    /// What the client got for its last call to an endpoint: a success only when the origin
    /// answered 2xx and the whole answer reached the client.
    static func lastAnswer(from endpoint: String, _ evidence: RunEvidence) -> (succeeded: Bool, text: String) {
        let path = OriginAPI.path(of: endpoint)
        guard let last = evidence.requests.last(where: { $0.path == path }) else {
            return (false, "it never called \(path)")
        }
        let call = "its last call (\(last.method) \(path) at +\(Self.seconds(last.at)))"
        guard let status = last.status else {
            let done = last.effect.map { _ in " after the origin did the work" } ?? ""
            return (false, "\(call) got no answer\(done): the connection closed without a response")
        }
        guard (200..<300).contains(status) else { return (false, "\(call) got \(status)") }
        guard !last.cutShort else { return (false, "\(call) got \(status), but the answer was cut short") }
        return (true, "\(call) got \(status)")
    }

    /// A file the client wrote, open for reading; or why not. Only a regular file at `path` itself is
    /// read: netcond may run as root, and a symbolic link could point at any file of the machine (whose
    /// first bytes a mismatch quotes), a pipe would block and a device such as /dev/zero never end.
    /// With `place` (the client's working folder, which `path` is in), a subfolder on the way must be
    /// one the client made there, not a symbolic link to another place; and with its owner (a client
    /// run as another user) the file must be that user's: a hard link to a file the client could not
    /// read is refused, not quoted.
    static func openClientFile(_ path: String, in place: ClientFolder? = nil) -> (handle: FileHandle?, problem: String)
    {
        let folder = place?.path
        let missing = "missing (the client wrote no such file)"
        let linked = "in a folder reached through a symbolic link (the checks do not follow links)"
        var descriptor: Int32
        if let folder, path.hasPrefix(folder + "/") {
            // Each step from the working folder (netcond's own) is opened relative to the one before
            // and never through a link: a client that swaps a folder for a link while the checks
            // read cannot send them elsewhere (a path resolved first and opened after could).
            let steps = path.dropFirst(folder.count + 1).split(separator: "/").map(String.init).filter { $0 != "." }
            guard let name = steps.last, !steps.contains("..") else { return (nil, missing) }
            var directory = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard directory >= 0 else { return (nil, missing) }
            for step in steps.dropLast() {
                let next = openat(directory, step, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                let failure = errno
                close(directory)
                guard next >= 0 else { return (nil, failure == ELOOP || failure == ENOTDIR ? linked : missing) }
                directory = next
            }
            descriptor = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            let failure = errno
            close(directory)
            errno = failure
        } else {
            descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        }
        guard descriptor >= 0 else {
            return (
                nil,
                errno == ELOOP
                    ? "a symbolic link, not a file the client wrote (the checks do not follow links)"
                    : missing
            )
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            return (nil, "not a regular file (a pipe, a device or a folder)")
        }
        if let owner = place?.owner, info.st_uid != owner {
            close(descriptor)
            return (
                nil,
                "not the client's own file (its owner is user \(info.st_uid), the client ran as user \(owner); "
                    + "the checks read only files the client wrote)"
            )
        }
        return (FileHandle(fileDescriptor: descriptor, closeOnDealloc: true), "")
    }

    /// Compares a file with an origin file's bytes, streaming (`place`: see ``openClientFile(_:in:)``).
    static func compare(path: String, in place: ClientFolder? = nil, with file: OriginFile) -> (
        identical: Bool, text: String
    ) {
        let opened = Self.openClientFile(path, in: place)
        guard let handle = opened.handle else { return (false, opened.problem) }
        defer { try? handle.close() }
        let source = DeterministicBytes(seed: file.seed)
        let size = file.size.bytes
        var offset: Int64 = 0
        while true {
            let chunk = (try? handle.read(upToCount: 1 << 20)) ?? Data()
            if chunk.isEmpty { break }
            let inRange = Int(max(0, min(Int64(chunk.count), size - offset)))
            if let mismatch = source.firstMismatch(in: chunk.prefix(inRange), offset: offset) {
                let hint = Self.looksLikeHTML(chunk) ? " (it looks like an HTML page)" : Self.quoteIfText(chunk)
                return (false, "differs from \(file.path) at byte \(Self.bytes(mismatch))\(hint)")
            }
            offset += Int64(chunk.count)
            if offset > size {
                return (false, "\(Self.bytes(offset))+ bytes, longer than \(file.path) (\(Self.bytes(size)))")
            }
        }
        if offset < size {
            return (false, "\(Self.bytes(offset)) of \(Self.bytes(size)) bytes (short)")
        }
        return (true, "\(Self.bytes(size)) bytes identical to \(file.path)")
    }

    /// ` (it starts "…")` when the file begins with readable text: an error page or message saved as data.
    static func quoteIfText(_ data: Data) -> String {
        let head = data.prefix(200)
        guard !head.isEmpty, head.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 })
        else { return "" }
        var text = String(decoding: head.prefix(60), as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
            .replacingOccurrences(of: "\r", with: "")
        if head.count > 60 { text += "…" }
        return " (it starts \"\(text)\")"
    }

    private static func looksLikeHTML(_ data: Data) -> Bool {
        let head = String(decoding: data.prefix(512), as: UTF8.self).lowercased()
        return head.contains("<html") || head.contains("<!doctype html")
    }
}
