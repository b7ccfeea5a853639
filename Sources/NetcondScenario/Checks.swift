import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// What a run left behind for the checks to judge: how the client ended, what the origin saw, and
/// where the client's files are. Times are seconds since the client started.
public struct RunEvidence: Sendable {
    public struct Request: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var method: String
        /// Path without the query (`/files/big.bin`).
        public var path: String
        public var range: String?
        public var idempotencyKey: String?
        public var status: Int?
        public var retryAfter: String?
        public var bodyBytesSent: Int64
        public var completed: Bool
        /// Seconds since the client started when the origin finished (or cut) the response.
        public var ended: Double?
        /// A POST's side effect at the origin.
        public var effect: OriginEffect?
        /// For an attempt that never reached the origin: how it ended.
        public var connectFailure: AttemptOutcome?
        /// Body bytes the origin sent that never reached the client: the connection ended (the link
        /// cut it, or the client left) while they sat in socket buffers or on the link.
        public var undelivered: Int64 = 0
        /// How far ``undelivered`` may overstate the loss (behind TLS the proxy counts ciphertext).
        public var undeliveredUncertainty: Int64 = 0
        /// How the link ended the connection, if it did.
        public var linkCut: CutMode?
        /// Seconds after its client's FIN reached netcond that this request reached the origin:
        /// it was on the emulated link when the client closed (or shut down its sending side),
        /// and went on as on a network. Nil for a request that arrived before.
        public var afterClientFIN: Double?

        public init(
            at: Double, method: String = "GET", path: String, range: String? = nil, idempotencyKey: String? = nil,
            status: Int? = 200, retryAfter: String? = nil, bodyBytesSent: Int64 = 0, completed: Bool = true,
            ended: Double? = nil, effect: OriginEffect? = nil
        ) {
            self.at = at
            self.method = method
            self.path = path
            self.range = range
            self.idempotencyKey = idempotencyKey
            self.status = status
            self.retryAfter = retryAfter
            self.bodyBytesSent = bodyBytesSent
            self.completed = completed
            self.ended = ended
            self.effect = effect
        }

        /// Body bytes that reached the client.
        public var bodyBytesReceived: Int64 {
            max(0, self.bodyBytesSent - self.undelivered)
        }

        /// The client got less than the whole response: the origin cut it, or the connection
        /// ended with some of it still on the way.
        public var cutShort: Bool {
            !self.completed || self.undelivered > 0
        }

        /// Failed from the client's point of view: an error status, no answer, or a cut body.
        var failed: Bool {
            guard let status = self.status else { return true }
            return status >= 500 || status == 429 || status == 408 || self.cutShort
        }

        /// The `M` of `Range: bytes=M-` (nil without a Range header or for another form).
        var rangeStart: Int64? {
            guard let range = self.range?.trimmingCharacters(in: .whitespaces).lowercased(), range.hasPrefix("bytes=") else { return nil }
            let spec = range.dropFirst("bytes=".count)
            guard let dash = spec.firstIndex(of: "-"), !spec.contains(",") else { return nil }
            return Int64(spec[..<dash].trimmingCharacters(in: .whitespaces))
        }
    }

    /// A connection the proxy tried to open for the client and that failed (an outage refused or
    /// reset it, a blackhole left it unanswered): an attempt that never reached the origin.
    public struct FailedConnect: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var host: String
        public var port: Int
        public var outcome: AttemptOutcome

        public init(at: Double, host: String, port: Int, outcome: AttemptOutcome) {
            self.at = at
            self.host = host
            self.port = port
            self.outcome = outcome
        }
    }

    /// A connection to the origin that was made, but held past the link's set-up time (SYNs
    /// swallowed by a blackhole or lost, a held connect): the client's connect to netcond had
    /// succeeded at once, so a connect time-out it set could not fire meanwhile.
    public struct HeldConnect: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        /// Seconds past the link's set-up time.
        public var heldFor: Double

        public init(at: Double, heldFor: Double) {
            self.at = at
            self.heldFor = heldFor
        }
    }

    /// A line the client printed.
    public struct OutputLine: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var stderr: Bool
        public var text: String

        public init(at: Double, stderr: Bool = false, text: String) {
            self.at = at
            self.stderr = stderr
            self.text = text
        }
    }

    /// What the captive portal did, from the proxy's event log.
    /// What the link recorded of itself: its state changes (phases, stalls, outages, cuts), the
    /// faults it applied and the portal's doings, for the report's timeline.
    public struct LinkEvent: Sendable, Equatable {
        public var at: Double
        /// `link`, `fault` or `captive`.
        public var kind: String
        public var detail: String

        public init(at: Double, kind: String, detail: String) {
            self.at = at
            self.kind = kind
            self.detail = detail
        }
    }

    public struct PortalEvent: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var kind: PortalAction
        public var detail: String

        public init(at: Double, kind: PortalAction, detail: String = "") {
            self.at = at
            self.kind = kind
            self.detail = detail
        }
    }

    /// How the client's traffic met the link. Through the proxy (`stream`) some connection-level
    /// failures cannot reach the client as a network would show them (see ``ProxyFidelity``).
    public enum Engine: String, Sendable {
        case stream
        case packet
    }

    public var engine: Engine = .stream
    /// Which TCP sender the run's servers used: under the stream engine the model of the profile's
    /// `tcp:`; under the packet engine the origin's kernel sender (``SenderReport``).
    public var sender: String?
    public var exit: ExitStatus?
    /// The client was stopped at its deadline.
    public var timedOut: Bool
    public var deadline: Span
    /// Seconds from the client's start to its end.
    public var duration: Double
    public var requests: [Request]
    /// Connections to the origin that failed before reaching it.
    public var failedConnects: [FailedConnect]
    /// Connections to the origin that were made late (see ``HeldConnect``).
    public var heldConnects: [HeldConnect] = []
    public var workingDirectory: String
    public var origin: OriginContent
    /// The lines the client printed (the first ``OutputCapture/maxLines``).
    public var lines: [OutputLine]
    /// The last lines it wrote to stderr.
    public var stderrTail: String
    public var portal: [PortalEvent]
    public var linkEvents: [LinkEvent] = []

    public init(
        exit: ExitStatus?, timedOut: Bool, deadline: Span, duration: Double, requests: [Request],
        failedConnects: [FailedConnect] = [], workingDirectory: String, origin: OriginContent,
        lines: [OutputLine] = [], stderrTail: String = "", portal: [PortalEvent] = []
    ) {
        self.exit = exit
        self.timedOut = timedOut
        self.deadline = deadline
        self.duration = duration
        self.requests = requests
        self.failedConnects = failedConnects
        self.workingDirectory = workingDirectory
        self.origin = origin
        self.lines = lines
        self.stderrTail = stderrTail
        self.portal = portal
    }

    /// GETs of one origin file, in order.
    func gets(of file: String) -> [Request] {
        let path = OriginFile.path(of: file)
        return self.requests.filter { $0.method == "GET" && $0.path == path }
    }
}

/// A check's verdict and the evidence that decided it: one line, then details.
public struct CheckResult: Sendable, Equatable {
    public var name: String
    public var passed: Bool
    /// One line: what was seen, and on failure what was needed.
    public var evidence: String
    public var details: [String]
    /// Why the verdict may not hold on a real network: the decision rested on events the engine
    /// could not show the client as a network would (nil when it did not).
    public var caveat: String?
    /// The moments (seconds since the client started) the verdict rests on, in order.
    public var marks: [Double] = []

    public init(name: String, passed: Bool, evidence: String, details: [String] = [], caveat: String? = nil) {
        self.name = name
        self.passed = passed
        self.evidence = evidence
        self.details = details
        self.caveat = caveat
    }
}

public enum Checks {
    /// The check's verdict, with a caveat when it rests on what the proxy could not show faithfully.
    public static func evaluate(_ spec: CheckSpec, _ evidence: RunEvidence) -> CheckResult {
        var result = self.verdict(spec, evidence)
        result.caveat = ProxyFidelity.caveat(for: spec, evidence)
        result.marks = self.marks(spec, evidence)
        return result
    }

    static func verdict(_ spec: CheckSpec, _ evidence: RunEvidence) -> CheckResult {
        switch spec {
        case .completes(let check): return self.completes(check, evidence)
        case .resumes(let check): return self.resumes(check, evidence)
        case .backsOff(let check): return self.backsOff(check, evidence)
        case .staysUsable(let check): return self.staysUsable(check, evidence)
        case .idempotent(let check): return self.idempotent(check, evidence)
        case .captiveSafe(let check): return self.captiveSafe(check, evidence)
        }
    }

    // MARK: completes

    static func completes(_ check: CompletesCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "completes"
        if evidence.timedOut {
            return CheckResult(name: name, passed: false, evidence: "still running at its \(formatSeconds(evidence.deadline)) deadline; stopped (need exit \(check.exit) before it)")
        }
        guard let exit = evidence.exit else {
            return CheckResult(name: name, passed: false, evidence: "the client did not run")
        }
        let ended = "after \(Self.seconds(evidence.duration))"
        guard exit == .exited(check.exit) else {
            return CheckResult(name: name, passed: false, evidence: "\(Self.describe(exit)) \(ended) (need exit \(check.exit))")
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
                path: (evidence.workingDirectory as NSString).appendingPathComponent(output), in: evidence.workingDirectory,
                with: file)
            details.append("\(output): \(verdict.text)")
            if !verdict.identical && failure == nil { failure = "\(output): \(verdict.text)" }
        }
        if let failure {
            return CheckResult(name: name, passed: false, evidence: "exit \(exit.shellCode) \(ended), but \(failure)", details: details)
        }
        let files = details.isEmpty ? "" : "; " + details.joined(separator: "; ")
        return CheckResult(name: name, passed: true, evidence: "exit \(check.exit) \(ended)\(files)", details: details)
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
    /// With `folder` (the client's working folder, which `path` is in), a subfolder on the way must be
    /// one the client made there, not a symbolic link to another place.
    static func openClientFile(_ path: String, in folder: String? = nil) -> (handle: FileHandle?, problem: String) {
        let parent = (path as NSString).deletingLastPathComponent
        if let folder, path.hasPrefix(folder + "/"), parent != folder, let base = Self.realPath(folder) {
            let expected = base + parent.dropFirst(folder.count)
            guard let actual = Self.realPath(parent) else { return (nil, "missing (the client wrote no such file)") }
            guard actual == expected else {
                return (nil, "in a folder reached through a symbolic link (the checks do not follow links)")
            }
        }
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            return (nil, errno == ELOOP
                ? "a symbolic link, not a file the client wrote (the checks do not follow links)"
                : "missing (the client wrote no such file)")
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            return (nil, "not a regular file (a pipe, a device or a folder)")
        }
        return (FileHandle(fileDescriptor: descriptor, closeOnDealloc: true), "")
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Compares a file with an origin file's bytes, streaming (`folder`: see ``openClientFile(_:in:)``).
    static func compare(path: String, in folder: String? = nil, with file: OriginFile) -> (identical: Bool, text: String) {
        let opened = Self.openClientFile(path, in: folder)
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
        guard !head.isEmpty, head.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) else { return "" }
        var text = String(decoding: head.prefix(60), as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
            .replacingOccurrences(of: "\r", with: "")
        if head.count > 60 { text += "…" }
        return " (it starts \"\(text)\")"
    }

    private static func looksLikeHTML(_ data: Data) -> Bool {
        let head = String(decoding: data.prefix(512), as: UTF8.self).lowercased()
        return head.contains("<html") || head.contains("<!doctype html")
    }

    // MARK: resumes

    static func resumes(_ check: ResumesCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "resumes"
        guard let file = evidence.origin.file(named: check.file) else {
            return CheckResult(name: name, passed: false, evidence: "no file \(check.file) at the origin")
        }
        let gets = evidence.gets(of: check.file)
        var details: [String] = []
        var cuts = 0
        for (index, request) in gets.enumerated() where request.bodyBytesReceived > 0 && request.cutShort {
            cuts += 1
            // Where the client's copy ends: what the response started at plus what reached it.
            let had = (request.status == 206 ? request.rangeStart ?? 0 : 0) + request.bodyBytesReceived
            // Who cut it, when known: the link (a cut, a reset outage); else the origin's fault, a
            // proxy fault or the client leaving look alike from here.
            let cutter = request.linkCut.map { "the link \($0.pastTense) it" }
            guard index + 1 < gets.count else {
                return CheckResult(
                    name: name, passed: false,
                    evidence: "cut at byte \(Self.bytes(had)) (+\(Self.seconds(request.at))\(cutter.map { "; " + $0 } ?? "")), and the client never asked again",
                    details: details)
            }
            let next = gets[index + 1]
            let after = request.ended.map { "+\(Self.seconds(next.at - $0)) after \(cutter ?? "the cut")" }
                ?? "+\(Self.seconds(next.at - request.at)) after the cut request began"
            guard let start = next.rangeStart else {
                return CheckResult(
                    name: name, passed: false,
                    evidence: "cut at byte \(Self.bytes(had)); the next request asked for the whole file again (no Range, \(after))",
                    details: details)
            }
            guard start <= had + request.undeliveredUncertainty, start >= had - check.slack.bytes else {
                return CheckResult(
                    name: name, passed: false,
                    evidence: "cut at byte \(Self.bytes(had)); the next request asked Range: bytes=\(start)- (need \(Self.bytes(max(0, had - check.slack.bytes)))…\(Self.bytes(had)))",
                    details: details)
            }
            details.append("cut at \(Self.bytes(had)) → Range: bytes=\(start)- (\(after))")
        }
        guard cuts > 0 else {
            return CheckResult(
                name: name, passed: false,
                evidence: gets.isEmpty ? "the client never asked for \(file.path)" : "no response for \(file.path) was cut, so nothing had to resume (\(gets.count) request\(gets.count == 1 ? "" : "s"))")
        }
        // What reached the client: bytes the origin wrote into buffers a cut then threw away were
        // never the client's to re-download.
        let served = gets.reduce(Int64(0)) { $0 + $1.bodyBytesReceived }
        let ratio = Double(served) / Double(file.size.bytes)
        let servedText = "\(Self.bytes(served)) received for a \(Self.bytes(file.size.bytes)) file (\(String(format: "%.2f", ratio))×)"
        guard ratio <= 1 + check.tolerance else {
            return CheckResult(name: name, passed: false,
                               evidence: details.joined(separator: "; ") + "; but \(servedText), need ≤ \(String(format: "%.2f", 1 + check.tolerance))×",
                               details: details)
        }
        return CheckResult(name: name, passed: true, evidence: details.joined(separator: "; ") + "; \(servedText)", details: details)
    }

    // MARK: backs-off

    static func backsOff(_ check: BacksOffCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "backs-off"
        // Attempts: the requests that reached the origin, and the connections that never did.
        let connects = evidence.failedConnects.map { failed in
            var attempt = RunEvidence.Request(at: failed.at, method: "CONNECT", path: "", status: nil, completed: false)
            attempt.connectFailure = failed.outcome
            return attempt
        }
        let attempts = ((check.file.map { evidence.gets(of: $0) } ?? evidence.requests) + connects).sorted { $0.at < $1.at }
        guard let firstFailure = attempts.firstIndex(where: \.failed) else {
            return CheckResult(name: name, passed: false,
                               evidence: attempts.isEmpty ? "no attempt reached the origin" : "no attempt failed, so there was nothing to back off from (\(attempts.count) attempts)")
        }
        let lastFailure = attempts.lastIndex(where: \.failed)!
        let window = Array(attempts[firstFailure...min(lastFailure + 1, attempts.count - 1)])
        let times = window.map(\.at)
        let attemptTimes = Self.elided(times.map { "+" + Self.seconds($0) })
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        let gapText = Self.elided(gaps.map { Self.seconds($0) })
        var problems: [String] = []
        if gaps.isEmpty {
            problems.append("the client never retried after the failure at +\(Self.seconds(window[0].at))")
        }
        // Attempts in any 60 s window: the plainest sign of a client hammering.
        var busiest = 0
        var lower = 0
        for upper in times.indices {
            while times[upper] - times[lower] >= 60 { lower += 1 }
            busiest = max(busiest, upper - lower + 1)
        }
        if busiest > check.maxPerMinute {
            problems.append("\(busiest) attempts within a minute (cap \(check.maxPerMinute))")
        }
        var noGrowth: [String] = []
        for (index, gap) in gaps.enumerated() {
            let failed = window[index]
            if let retryAfter = failed.retryAfter, let seconds = Double(retryAfter) {
                if gap < seconds * (1 - check.jitter) {
                    problems.append("retry \(index + 1) came \(Self.seconds(gap)) after a Retry-After: \(retryAfter)")
                }
            } else if index > 0 {
                let needed = gaps[index - 1] * check.factor * (1 - check.jitter)
                if gap < needed {
                    noGrowth.append("gap \(index + 1) was \(Self.seconds(gap)) after \(Self.seconds(gaps[index - 1]))")
                }
            }
        }
        if noGrowth.count == 1 {
            problems.append("\(noGrowth[0]) (need ≥ ×\(Self.factor(check.factor)))")
        } else if noGrowth.count > 1 {
            problems.append("the gaps do not grow: \(noGrowth.count) of \(gaps.count - 1) are under ×\(Self.factor(check.factor)) the one before (\(noGrowth[0]))")
        }
        if let recovery = check.recovery {
            let failureEnd = attempts[lastFailure].at
            if let back = attempts[(lastFailure + 1)...].first(where: { !$0.failed }) {
                if back.at - failureEnd > recovery.seconds {
                    problems.append("came back \(Self.seconds(back.at - failureEnd)) after the last failure (need ≤ \(formatSeconds(recovery)))")
                }
            } else {
                problems.append("never came back after the last failure at +\(Self.seconds(failureEnd))")
            }
        }
        let retryAfters = Set(window.compactMap(\.retryAfter))
        var causes: [String: Int] = [:]
        for attempt in window where attempt.failed { causes[Self.failureCause(attempt), default: 0] += 1 }
        let causeText = causes.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
        var context = " [\(causeText)]"
        if !retryAfters.isEmpty { context += " (Retry-After \(retryAfters.sorted().joined(separator: ", ")) s)" }
        let late = window.filter { $0.afterClientFIN != nil }
        if !late.isEmpty {
            // On the origin's clock, but sent before: they were on the link when the client closed.
            context += " (\(late.count == 1 ? "1 of them" : "\(late.count) of them") reached the origin after its client had "
                + "closed, already on the link: " + late.map { "+" + Self.seconds($0.at) }.joined(separator: ", ") + ")"
        }
        let seen = gaps.isEmpty
            ? "1 failed attempt at \(attemptTimes)\(context)"
            : "\(times.count) attempts at \(attemptTimes) (gaps \(gapText))\(context)"
        if problems.isEmpty {
            return CheckResult(name: name, passed: true, evidence: seen)
        }
        return CheckResult(name: name, passed: false, evidence: "\(seen) — " + problems.prefix(2).joined(separator: "; ")
                           + (problems.count > 2 ? "; and \(problems.count - 2) more" : ""))
    }

    // MARK: captive-safe

    /// The start of the portal's login page: found in a file, the page was saved as data.
    static let portalMarker = Array(CaptivePortal.loginPage(status: 200).body.prefix(64))

    static func captiveSafe(_ check: CaptiveSafeCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "captive-safe"
        let met = evidence.portal.filter { $0.kind == .answered || $0.kind == .intercepted }
        guard let firstMet = met.first else {
            return CheckResult(name: name, passed: false, evidence: "the portal never stood between the client and the origin, so there was nothing to judge")
        }
        let opened = evidence.portal.last { $0.kind == .opened && $0.at >= firstMet.at }
        var seen = "the portal met \(met.count) request\(met.count == 1 ? "" : "s") (\(Self.elided(met.map { "+" + Self.seconds($0.at) })))"
        seen += opened.map { ", opened at +\(Self.seconds($0.at))" } ?? ", still closed when the client ended"
        var problems: [String] = []
        var fileTexts: [String] = []
        var allIdentical = true
        for output in check.files {
            guard let file = evidence.origin.file(named: output.file) else { continue }
            let path = (evidence.workingDirectory as NSString).appendingPathComponent(output.output)
            if let offset = Self.find(Self.portalMarker, inFileAt: path, in: evidence.workingDirectory) {
                problems.append(offset == 0
                    ? "\(output.output) holds the portal's login page, not the data"
                    : "\(output.output) has the portal's login page spliced into the data at byte \(Self.bytes(Int64(offset)))")
                allIdentical = false
                continue
            }
            let verdict = Self.compare(path: path, in: evidence.workingDirectory, with: file)
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
                problems.append(opened == nil
                    ? "it ended before the portal opened, without the data (\(exitText)" + files
                    : "never completed after the portal opened (\(exitText)" + files)
            } else if evidence.exit == .exited(check.exit) {
                problems.append("and it exited \(check.exit) as if all was well")
            }
        }
        if problems.isEmpty {
            return CheckResult(name: name, passed: true,
                               evidence: "\(seen); then \(exitText) after \(Self.seconds(evidence.duration)); " + fileTexts.joined(separator: "; "))
        }
        return CheckResult(name: name, passed: false, evidence: "\(seen) — " + problems.joined(separator: "; "))
    }

    /// The offset of `needle` in the file at `path`, streaming (nil when absent or unreadable).
    static func find(_ needle: [UInt8], inFileAt path: String, in folder: String? = nil) -> Int? {
        guard !needle.isEmpty, let handle = Self.openClientFile(path, in: folder).handle else { return nil }
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
            if haystack[index] == first && haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    // MARK: idempotent

    static func idempotent(_ check: IdempotentCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "idempotent"
        let path = OriginAPI.path(of: check.api)
        let calls = evidence.requests.filter { $0.method == "POST" && $0.path == path }
        guard !calls.isEmpty else {
            return CheckResult(name: name, passed: false, evidence: "the client never called POST \(path)")
        }
        let created = Set(calls.compactMap { call -> Int? in
            if case .created(let id)? = call.effect { return id }
            return nil
        })
        let lost = calls.filter { $0.effect != nil && $0.status == nil }
        let details = calls.map { call -> String in
            var text = "+\(Self.seconds(call.at)) "
            switch call.effect {
            case .created(let id)?: text += "created #\(id)"
            case .replayed(let id)?: text += "replayed #\(id)"
            case nil: text += "no effect"
            }
            if call.effect != nil && call.status == nil { text += ", response lost" }
            if let late = call.afterClientFIN {
                text += ", reached the origin \(Self.seconds(late)) after its client had closed (it was already on the link)"
            }
            text += call.idempotencyKey.map { ", key '\(Self.clip($0, to: 40))'" } ?? ", no Idempotency-Key"
            return text
        }
        let seen = "\(calls.count) POST\(calls.count == 1 ? "" : "s") to \(path): " + Self.elided(details.map { "(\($0))" })
        guard !lost.isEmpty else {
            return CheckResult(name: name, passed: false, evidence: "\(seen) — no response was lost, so nothing had to be repeated safely", details: details)
        }
        if created.count <= 1 {
            return CheckResult(name: name, passed: true, evidence: "\(seen) — \(created.count) object created", details: details)
        }
        let keys = calls.map(\.idempotencyKey)
        let why: String
        if keys.allSatisfy({ $0 == nil }) {
            why = "the retries carried no Idempotency-Key"
        } else if Set(keys.compactMap { $0 }).count > 1 {
            why = "the retries carried different Idempotency-Keys"
        } else {
            why = "not every call carried the Idempotency-Key"
        }
        return CheckResult(
            name: name, passed: false,
            evidence: "\(seen) — \(created.count) objects created for one intent (\(why))", details: details)
    }

    // MARK: stays-usable

    static func staysUsable(_ check: StaysUsableCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "stays-usable"
        var seen: [String] = []
        var problems: [String] = []
        if let steps = check.steps {
            let budget = check.budget.seconds
            // Each step: how long it took, when it began, when it ended, what it was.
            var durations: [(seconds: Double, at: Double, end: Double, what: String)] = []
            let described: String
            switch steps {
            case .lines(let pattern):
                described = "lines matching '\(pattern)'"
                let regex = try? NSRegularExpression(pattern: pattern)
                var previous = 0.0
                for line in evidence.lines {
                    let range = NSRange(line.text.startIndex..., in: line.text)
                    guard regex?.firstMatch(in: line.text, range: range) != nil else { continue }
                    durations.append((line.at - previous, line.at, line.at, "'\(Self.clip(line.text))'"))
                    previous = line.at
                }
            case .requests(let glob):
                described = "requests for \(glob)"
                for request in evidence.requests where fnmatch(glob, request.path, 0) == 0 {
                    guard let ended = request.ended else {
                        durations.append((.infinity, request.at, .infinity, "\(request.method) \(request.path) never answered"))
                        continue
                    }
                    let broken = request.cutShort || (request.status ?? 599) >= 400
                    durations.append((ended - request.at, request.at, ended,
                                      "\(request.method) \(request.path)" + (broken ? " (\(Self.failureCause(request)))" : "")))
                    if broken { problems.append("\(request.method) \(request.path) at +\(Self.seconds(request.at)) failed (\(Self.failureCause(request)))") }
                }
            }
            if let slowest = durations.max(by: { $0.seconds < $1.seconds }) {
                let slowText = slowest.seconds.isFinite ? Self.seconds(slowest.seconds) : "forever"
                seen.append("\(durations.count) step\(durations.count == 1 ? "" : "s") (\(described)), slowest \(slowText): \(slowest.what) at +\(Self.seconds(slowest.at))")
                let over = durations.filter { $0.seconds > budget }
                if !over.isEmpty {
                    problems.append("\(over.count) step\(over.count == 1 ? "" : "s") over the \(formatSeconds(check.budget)) budget")
                }
            } else {
                seen.append("no \(described)")
            }
            if let within = check.within, let last = durations.map(\.end).max() {
                if last > within.seconds {
                    problems.append("the last step ended at +\(last.isFinite ? Self.seconds(last) : "never") (need all within \(formatSeconds(within)))")
                } else {
                    seen.append("all done by +\(Self.seconds(last))")
                }
            }
            if durations.count < check.minSteps {
                problems.append("\(durations.count) of the \(check.minSteps) step\(check.minSteps == 1 ? "" : "s") needed")
            }
            // A client stopped at its deadline was not usable for the rest of the run, however fast its steps.
            if evidence.timedOut && check.givesUpWithin == nil {
                problems.append("still running at its \(formatSeconds(evidence.deadline)) deadline")
            }
        }
        if let within = check.givesUpWithin {
            let bound = formatSeconds(within)
            if evidence.timedOut {
                problems.append("still running at its \(formatSeconds(evidence.deadline)) deadline (need it to end by itself within \(bound))")
            } else if let exit = evidence.exit {
                let said = Self.lastLine(evidence.stderrTail)
                var ended = "ended by itself after \(Self.seconds(evidence.duration)) (\(Self.describe(exit)))"
                if let said { ended += ", saying '\(Self.clip(said))'" }
                seen.append(ended)
                if evidence.duration > within.seconds {
                    problems.append("that is later than \(bound)")
                }
                if case .signaled(let signal) = exit {
                    problems.append("killed by signal \(signal) (a crash, not a report)")
                } else if exit != .exited(0) && said == nil {
                    problems.append("it failed with nothing on stderr (need a message saying why)")
                }
            } else {
                problems.append("the client did not run")
            }
        }
        let text = seen.joined(separator: "; ")
        if problems.isEmpty { return CheckResult(name: name, passed: true, evidence: text) }
        return CheckResult(name: name, passed: false, evidence: (text.isEmpty ? "" : text + " — ") + problems.joined(separator: "; "))
    }

    /// The last non-empty line of `text`, or nil.
    static func lastLine(_ text: String) -> String? {
        text.split(separator: "\n").last { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map(String.init)
    }

    static func clip(_ text: String, to length: Int = 80) -> String {
        text.count > length ? String(text.prefix(length - 1)) + "…" : text
    }

    /// At most eight items, the middle elided: `a b c d e f … z`.
    static func elided(_ items: [String]) -> String {
        guard items.count > 8 else { return items.joined(separator: " ") }
        return (items.prefix(6) + ["…"] + items.suffix(1)).joined(separator: " ")
    }

    /// What made an attempt fail, in a few words: `503`, `refused`, `cut body`, `no answer`.
    static func failureCause(_ attempt: RunEvidence.Request) -> String {
        if let failure = attempt.connectFailure { return failure.rawValue }
        guard let status = attempt.status else { return "no answer" }
        if status >= 400 { return String(status) }
        return attempt.cutShort ? "cut body" : "ok"
    }

    // MARK: formatting

    static func seconds(_ value: Double) -> String { String(format: "%.2fs", value) }
    static func factor(_ value: Double) -> String { String(format: "%g", value) }
    /// `2,097,152`: exact byte counts, grouped in thousands.
    static func bytes(_ value: Int64) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return (value < 0 ? "-" : "") + grouped
    }

    static func describe(_ exit: ExitStatus) -> String {
        switch exit {
        case .exited(let code): return "exit \(code)"
        case .signaled(let signal): return "killed by signal \(signal)"
        }
    }
}
