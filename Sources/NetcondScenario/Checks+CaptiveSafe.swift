import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// `captive-safe`: behind a portal the client never saves the portal's page as data.
extension Checks {

    /// The start of the portal's login page: found in a file, the page was saved as data.
    static let portalMarker = Array(CaptivePortal.loginPage(status: 200).body.prefix(64))

    static func captiveSafe(_ check: CaptiveSafeCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "captive-safe"
        let met = evidence.portal.filter { $0.kind == .answered || $0.kind == .intercepted }
        guard let firstMet = met.first else {
            return CheckResult(
                name: name, passed: false,
                evidence: "the portal never stood between the client and the origin, so there was nothing to judge")
        }
        let opened = evidence.portal.last { $0.kind == .opened && $0.at >= firstMet.at }
        var seen =
            "the portal met \(met.count) request\(met.count == 1 ? "" : "s") (\(Self.elided(met.map { "+" + Self.seconds($0.at) })))"
        seen += opened.map { ", opened at +\(Self.seconds($0.at))" } ?? ", still closed when the client ended"
        var problems: [String] = []
        var fileTexts: [String] = []
        var allIdentical = true
        for output in check.files {
            guard let file = evidence.origin.file(named: output.file) else { continue }
            let path = (evidence.workingDirectory as NSString).appendingPathComponent(output.output)
            if let offset = Self.find(Self.portalMarker, inFileAt: path, in: evidence.clientFolder) {
                problems.append(
                    offset == 0
                        ? "\(output.output) holds the portal's login page, not the data"
                        : "\(output.output) has the portal's login page spliced into the data at byte \(Self.bytes(Int64(offset)))"
                )
                allIdentical = false
                continue
            }
            let verdict = Self.compare(path: path, in: evidence.clientFolder, with: file)
            fileTexts.append("\(output.output): \(verdict.text)")
            if !verdict.identical { allIdentical = false }
        }
        let exitText = evidence.exit.map(Self.describe) ?? "did not run"
        if evidence.timedOut {
            problems.append("still running at its \(formatSeconds(evidence.deadline)) deadline")
        } else if evidence.exit == .exited(check.exit) && !allIdentical && problems.isEmpty {
            problems.append("\(exitText) with wrong data: " + fileTexts.joined(separator: "; "))
        } else if evidence.exit != .exited(check.exit) || !allIdentical {
            if problems.isEmpty {
                let files = fileTexts.isEmpty ? ")" : "; " + fileTexts.joined(separator: "; ") + ")"
                problems.append(
                    opened == nil
                        ? "it ended before the portal opened, without the data (\(exitText)" + files
                        : "never completed after the portal opened (\(exitText)" + files)
            } else if evidence.exit == .exited(check.exit) {
                problems.append("and it exited \(check.exit) as if all was well")
            }
        }
        if problems.isEmpty {
            return CheckResult(
                name: name, passed: true,
                evidence: "\(seen); then \(exitText) after \(Self.seconds(evidence.duration)); "
                    + fileTexts.joined(separator: "; "))
        }
        return CheckResult(name: name, passed: false, evidence: "\(seen) — " + problems.joined(separator: "; "))
    }

    /// The offset of `needle` in the file at `path`, streaming (nil when absent or unreadable).
    static func find(_ needle: [UInt8], inFileAt path: String, in place: ClientFolder? = nil) -> Int? {
        guard !needle.isEmpty, let handle = Self.openClientFile(path, in: place).handle else { return nil }
        defer { try? handle.close() }
        var carry: [UInt8] = []
        var consumed = 0
        while true {
            let chunk = (try? handle.read(upToCount: 1 << 20)) ?? Data()
            if chunk.isEmpty { return nil }
            let window = carry + Array(chunk)
            if let found = Self.firstIndex(of: needle, in: window) { return consumed - carry.count + found }
            consumed += chunk.count
            carry = Array(window.suffix(needle.count - 1))
        }
    }

    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        let first = needle[0]
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == first && haystack[index..<(index + needle.count)].elementsEqual(needle) {
                return index
            }
            index += 1
        }
        return nil
    }
}
