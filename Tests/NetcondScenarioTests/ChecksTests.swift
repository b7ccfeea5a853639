import Foundation
import Testing

@testable import NetcondCore
@testable import NetcondPacket
@testable import NetcondScenario

/// The checks on hand-made evidence: each passes for a client that behaves and fails, with the
/// evidence that decided it, for one that does not.
@Suite struct ChecksTests {
    static let big = OriginFile(name: "big.bin", size: ByteCount(bytes: 1_000_000), seed: 7)
    typealias Request = RunEvidence.Request

    func evidence(
        _ requests: [Request], exit: NetcondScenario.ExitStatus? = .exited(0), timedOut: Bool = false,
        directory: String = "/nonexistent"
    ) -> RunEvidence {
        RunEvidence(
            exit: exit, timedOut: timedOut, deadline: .seconds(60), duration: 3.5, requests: requests,
            workingDirectory: directory, origin: OriginContent(files: [Self.big])
        )
    }

    // MARK: resumes

    @Test func resumingClientPasses() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 300_000, completed: false),
                Request(at: 1.2, path: "/files/big.bin", range: "bytes=300000-", status: 206, bodyBytesSent: 700_000),
            ]))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.evidence.contains("cut at 300,000 → Range: bytes=300000-"))
        #expect(result.evidence.contains("1,000,000 received for a 1,000,000 file (1.00×)"))
    }

    /// A response the origin finished whose connection the link then cut: the client has what
    /// reached it, not what the origin wrote into socket buffers.
    func linkCut(sent: Int64, undelivered: Int64, uncertainty: Int64 = 0, cut: CutMode = .reset) -> Request {
        var request = Request(
            at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: sent, completed: true, ended: 0.5)
        request.undelivered = undelivered
        request.undeliveredUncertainty = uncertainty
        request.linkCut = cut
        return request
    }

    @Test func aLinkCutCountsWhatReachedTheClient() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                self.linkCut(sent: 1_000_000, undelivered: 380_000),
                Request(at: 1.2, path: "/files/big.bin", range: "bytes=620000-", status: 206, bodyBytesSent: 380_000),
            ]))
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence.contains("cut at 620,000 → Range: bytes=620000- (+0.70s after the link reset it)"),
            "\(result.evidence)")
        // The 380,000 bytes the first response lost on the way were never the client's to waste.
        #expect(result.evidence.contains("1,000,000 received for a 1,000,000 file (1.00×)"))
    }

    @Test func aClientThatClaimsMoreThanReachedItFails() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                self.linkCut(sent: 1_000_000, undelivered: 380_000, cut: .close),
                Request(at: 1.2, path: "/files/big.bin", range: "bytes=700000-", status: 206, bodyBytesSent: 300_000),
            ]))
        #expect(!result.passed)
        #expect(
            result.evidence.contains(
                "cut at byte 620,000; the next request asked Range: bytes=700000- (need 554,464…620,000)"),
            "\(result.evidence)")
    }

    @Test func behindTLSTheEstimateLeavesRoomForRecordOverhead() {
        let tls = self.linkCut(sent: 1_000_000, undelivered: 380_000, uncertainty: 806)
        let within = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                tls,
                Request(at: 1.2, path: "/files/big.bin", range: "bytes=620800-", status: 206, bodyBytesSent: 379_200),
            ]))
        #expect(within.passed, "\(within.evidence)")
        let beyond = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                tls,
                Request(at: 1.2, path: "/files/big.bin", range: "bytes=620807-", status: 206, bodyBytesSent: 379_193),
            ]))
        #expect(!beyond.passed)
    }

    @Test func anOriginFaultsCutIsNamedInTheEvidence() {
        var cut = Request(
            at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 600_000, completed: false, ended: 0.5)
        cut.originFault = .cut(after: ByteCount(bytes: 600_000), end: .fin)
        let result = Checks.resumes(ResumesCheck(file: "big.bin"), self.evidence([cut]))
        #expect(!result.passed)
        #expect(
            result.evidence.contains(
                "(+0.10s; the origin's fault: \(FaultAction.cut(after: ByteCount(bytes: 600_000), end: .fin))), and the client never asked again"
            ),
            "\(result.evidence)")
    }

    @Test func aLinkCutNobodyResumedFromFails() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"), self.evidence([self.linkCut(sent: 1_000_000, undelivered: 400_000)]))
        #expect(!result.passed)
        #expect(
            result.evidence.contains(
                "cut at byte 600,000 (+0.10s; the link reset it), and the client never asked again"),
            "\(result.evidence)")
    }

    /// A response still arriving when the run ended (the client stopped at its deadline with the
    /// connection open): not a cut the client must resume from, nor a failed attempt to back off
    /// from, though it did not arrive whole.
    @Test func whatTheRunsEndStoppedIsNotACutTheClientAnswersFor() {
        var stopped = Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 1_000_000)
        stopped.undelivered = 400_000
        stopped.stoppedByRunEnd = true
        #expect(stopped.cutShort && !stopped.cutByNetwork && !stopped.failed)
        let resumes = Checks.resumes(ResumesCheck(file: "big.bin"), self.evidence([stopped]))
        #expect(!resumes.evidence.contains("never asked again"), "\(resumes.evidence)")
        // The same bytes lost to a cut of the link's are the client's to answer for.
        let cut = self.linkCut(sent: 1_000_000, undelivered: 400_000)
        #expect(cut.cutByNetwork && cut.failed)
    }

    @Test func cutsOfRangeResponsesCountFromTheirStart() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 300_000, completed: false),
                Request(
                    at: 1.2, path: "/files/big.bin", range: "bytes=300000-", status: 206, bodyBytesSent: 300_000,
                    completed: false),
                Request(at: 2.2, path: "/files/big.bin", range: "bytes=590000-", status: 206, bodyBytesSent: 410_000),
            ]))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.evidence.contains("cut at 600,000 → Range: bytes=590000-"))
    }

    @Test func startingOverFails() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 300_000, completed: false),
                Request(at: 1.2, path: "/files/big.bin", status: 200, bodyBytesSent: 1_000_000),
            ]))
        #expect(!result.passed)
        #expect(result.evidence.contains("asked for the whole file again (no Range"))
    }

    @Test func neverRetryingFails() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 300_000, completed: false)
            ]))
        #expect(!result.passed)
        #expect(result.evidence.contains("never asked again"))
    }

    @Test func resumingTooEarlyOrLateFails() {
        for start in [100_000, 300_001] {
            let result = Checks.resumes(
                ResumesCheck(file: "big.bin", slack: ByteCount(bytes: 65_536)),
                self.evidence([
                    Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 300_000, completed: false),
                    Request(
                        at: 1.2, path: "/files/big.bin", range: "bytes=\(start)-", status: 206,
                        bodyBytesSent: 1_000_000 - Int64(start)),
                ]))
            #expect(!result.passed)
            #expect(result.evidence.contains("need 234,464…300,000"), "\(result.evidence)")
        }
    }

    @Test func servingTooMuchFails() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin", tolerance: 0.1),
            self.evidence([
                Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 300_000, completed: false),
                Request(at: 1.2, path: "/files/big.bin", range: "bytes=300000-", status: 206, bodyBytesSent: 700_000),
                Request(at: 2.0, path: "/files/big.bin", status: 200, bodyBytesSent: 1_000_000),
            ]))
        #expect(!result.passed)
        #expect(result.evidence.contains("(2.00×), need ≤ 1.10×"), "\(result.evidence)")
    }

    @Test func noCutIsReportedNotPassed() {
        let result = Checks.resumes(
            ResumesCheck(file: "big.bin"),
            self.evidence([
                Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 1_000_000)
            ]))
        #expect(!result.passed)
        #expect(result.evidence.contains("no response for /files/big.bin was cut"))
    }

    // MARK: backs-off

    func attempts(_ times: [Double], retryAfter: String? = nil, thenSuccessAt success: Double? = nil) -> [Request] {
        times.map { Request(at: $0, path: "/files/big.bin", status: 503, retryAfter: retryAfter, bodyBytesSent: 20) }
            + (success.map { [Request(at: $0, path: "/files/big.bin", status: 200, bodyBytesSent: 1_000_000)] } ?? [])
    }

    @Test func exponentialBackoffPasses() {
        let result = Checks.backsOff(
            BacksOffCheck(file: "big.bin", recovery: .seconds(20)),
            self.evidence(self.attempts([0, 1, 3, 7], thenSuccessAt: 15)))
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence
                == "5 attempts at +0.00s +1.00s +3.00s +7.00s +15.00s (gaps 1.00s 2.00s 4.00s 8.00s) [503 ×4]")
    }

    @Test func tightLoopFails() {
        let times = (0..<40).map { Double($0) * 0.05 }
        let result = Checks.backsOff(
            BacksOffCheck(file: "big.bin", maxPerMinute: 30), self.evidence(self.attempts(times)))
        #expect(!result.passed)
        #expect(result.evidence.contains("40 attempts within a minute (cap 30)"), "\(result.evidence)")
        #expect(
            result.evidence.contains("the gaps do not grow: 38 of 38 are under ×1.5 the one before"),
            "\(result.evidence)")
        // A long list of retries is elided in the middle.
        #expect(
            result.evidence.hasPrefix("40 attempts at +0.00s +0.05s +0.10s +0.15s +0.20s +0.25s … +1.95s"),
            "\(result.evidence)")
    }

    @Test func refusedConnectionsThatNeverReachTheOriginCountAsAttempts() {
        // An outage refused the first three connections (the proxy saw them; the origin did not).
        var evidence = self.evidence(self.attempts([], thenSuccessAt: 7.2))
        evidence.failedConnects = [0.1, 1.2, 3.2].map {
            RunEvidence.FailedConnect(at: $0, host: "origin.netcond.test", port: 80, outcome: .refused)
        }
        let result = Checks.backsOff(BacksOffCheck(file: "big.bin", recovery: .seconds(10)), evidence)
        #expect(result.passed, "\(result.evidence)")
        #expect(result.evidence == "4 attempts at +0.10s +1.20s +3.20s +7.20s (gaps 1.10s 2.00s 4.00s) [refused ×3]")
        evidence.failedConnects = (0..<30).map {
            RunEvidence.FailedConnect(at: Double($0) * 0.2, host: "origin.netcond.test", port: 80, outcome: .unanswered)
        }
        let hammering = Checks.backsOff(BacksOffCheck(file: "big.bin", maxPerMinute: 20), evidence)
        #expect(!hammering.passed)
        #expect(hammering.evidence.contains("[unanswered ×30]"), "\(hammering.evidence)")
    }

    @Test func retryAfterIsHonouredOrNot() {
        let honoured = Checks.backsOff(
            BacksOffCheck(file: "big.bin"),
            self.evidence(self.attempts([0, 2.1, 4.2], retryAfter: "2", thenSuccessAt: 6.3)))
        #expect(honoured.passed, "\(honoured.evidence)")
        let ignored = Checks.backsOff(
            BacksOffCheck(file: "big.bin"),
            self.evidence(self.attempts([0, 0.1, 0.2], retryAfter: "2", thenSuccessAt: 0.3)))
        #expect(!ignored.passed)
        #expect(ignored.evidence.contains("retry 1 came 0.10s after a Retry-After: 2"), "\(ignored.evidence)")
    }

    @Test func attemptsPerMinuteAreCapped() {
        // Growing gaps, but far too many in a minute.
        let times = [0.0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3]
        let result = Checks.backsOff(
            BacksOffCheck(file: "big.bin", factor: 1.5, maxPerMinute: 5), self.evidence(self.attempts(times)))
        #expect(!result.passed)
        #expect(result.evidence.contains("7 attempts within a minute (cap 5)"), "\(result.evidence)")
    }

    @Test func neverComingBackFails() {
        let result = Checks.backsOff(
            BacksOffCheck(file: "big.bin", recovery: .seconds(10)), self.evidence(self.attempts([0, 1, 3])))
        #expect(!result.passed)
        #expect(result.evidence.contains("never came back after the last failure at +3.00s"), "\(result.evidence)")
        let late = Checks.backsOff(
            BacksOffCheck(file: "big.bin", recovery: .seconds(10)),
            self.evidence(self.attempts([0, 1, 3], thenSuccessAt: 30)))
        #expect(!late.passed)
        #expect(late.evidence.contains("came back 27.00s after the last failure (need ≤ 10 s)"), "\(late.evidence)")
    }

    @Test func noFailureMeansNothingToJudge() {
        let result = Checks.backsOff(BacksOffCheck(file: "big.bin"), self.evidence(self.attempts([], thenSuccessAt: 1)))
        #expect(!result.passed)
        #expect(result.evidence.contains("no attempt failed"))
    }

    // MARK: captive-safe

    @Test func captiveSafeTellsThePageSplicesAndShortFilesApart() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-captive-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = Data(DeterministicBytesReference.bytes(seed: 7, count: 1_000_000))
        let page = Data(CaptivePortal.loginPage(status: 200).body)
        try good.write(to: directory.appendingPathComponent("ok.bin"))
        try page.write(to: directory.appendingPathComponent("page.bin"))
        try (good.prefix(300_000) + page).write(to: directory.appendingPathComponent("spliced.bin"))
        try good.prefix(300_000).write(to: directory.appendingPathComponent("short.bin"))
        let portal = [
            RunEvidence.PortalEvent(at: 0.5, kind: .answered), RunEvidence.PortalEvent(at: 1.5, kind: .answered),
            RunEvidence.PortalEvent(at: 4.0, kind: .opened),
        ]

        func run(
            _ output: String, exit: NetcondScenario.ExitStatus = .exited(0),
            portal events: [RunEvidence.PortalEvent]? = nil
        ) -> CheckResult {
            var evidence = self.evidence([], exit: exit, directory: directory.path)
            evidence.portal = events ?? portal
            return Checks.captiveSafe(CaptiveSafeCheck(files: [OutputFile(output: output, file: "big.bin")]), evidence)
        }
        #expect(run("ok.bin").passed)
        #expect(
            run("ok.bin").evidence
                == "the portal met 2 requests (+0.50s +1.50s), opened at +4.00s; then exit 0 after 3.50s; ok.bin: 1,000,000 bytes identical to /files/big.bin"
        )
        #expect(
            run("page.bin").evidence.hasSuffix(
                "page.bin holds the portal's login page, not the data; and it exited 0 as if all was well"))
        #expect(
            run("spliced.bin", exit: .exited(1)).evidence.hasSuffix(
                "spliced.bin has the portal's login page spliced into the data at byte 300,000"))
        #expect(
            run("short.bin").evidence.hasSuffix("exit 0 with wrong data: short.bin: 300,000 of 1,000,000 bytes (short)")
        )
        #expect(
            run("short.bin", exit: .exited(8)).evidence.hasSuffix(
                "never completed after the portal opened (exit 8; short.bin: 300,000 of 1,000,000 bytes (short))"))
        #expect(
            run("ok.bin", portal: []).evidence
                == "the portal never stood between the client and the origin, so there was nothing to judge")
        #expect(!run("ok.bin", portal: []).passed)
        // The marker is found across read boundaries too.
        let big = Data(repeating: 0x41, count: (1 << 20) - 10) + page
        try big.write(to: directory.appendingPathComponent("boundary.bin"))
        #expect(
            Checks.find(Checks.portalMarker, inFileAt: directory.appendingPathComponent("boundary.bin").path)
                == (1 << 20) - 10)
    }

    // MARK: idempotent

    @Test func oneObjectAfterALostResponsePasses() {
        let calls = [
            Request(
                at: 0.2, method: "POST", path: "/api/orders", idempotencyKey: "k", status: nil, completed: false,
                effect: .created(1)),
            Request(
                at: 1.4, method: "POST", path: "/api/orders", idempotencyKey: "k", status: 200, effect: .replayed(1)),
        ]
        let result = Checks.idempotent(IdempotentCheck(api: "orders"), self.evidence(calls))
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence
                == "2 POSTs to /api/orders: (+0.20s created #1, response lost, key 'k') (+1.40s replayed #1, key 'k') — 1 object created"
        )
    }

    @Test func duplicatesFailWithTheReason() {
        func calls(_ first: String?, _ second: String?) -> [Request] {
            [
                Request(
                    at: 0.2, method: "POST", path: "/api/orders", idempotencyKey: first, status: nil, completed: false,
                    effect: .created(1)),
                Request(
                    at: 1.4, method: "POST", path: "/api/orders", idempotencyKey: second, status: 201,
                    effect: .created(2)),
            ]
        }
        let check = IdempotentCheck(api: "orders")
        #expect(
            Checks.idempotent(check, self.evidence(calls(nil, nil))).evidence.hasSuffix(
                "2 objects created for one intent (the retries carried no Idempotency-Key)"))
        #expect(
            Checks.idempotent(check, self.evidence(calls("a", "b"))).evidence.hasSuffix(
                "(the retries carried different Idempotency-Keys)"))
        #expect(
            Checks.idempotent(check, self.evidence(calls("a", nil))).evidence.hasSuffix(
                "(not every call carried the Idempotency-Key)"))
        let untested = Checks.idempotent(
            check,
            self.evidence([Request(at: 0.2, method: "POST", path: "/api/orders", status: 201, effect: .created(1))]))
        #expect(
            !untested.passed
                && untested.evidence.hasSuffix("no response was lost, so nothing had to be repeated safely"))
        #expect(Checks.idempotent(check, self.evidence([])).evidence == "the client never called POST /api/orders")
    }

    // MARK: stays-usable

    typealias Line = RunEvidence.OutputLine

    @Test func givingUpInTimeWithAReasonPasses() {
        var evidence = self.evidence([], exit: .exited(28))
        evidence.duration = 5.02
        evidence.stderrTail = "curl: (28) Operation timed out after 5001 milliseconds\n"
        let result = Checks.staysUsable(StaysUsableCheck(givesUpWithin: .seconds(Int64(15))), evidence)
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence
                == "ended by itself after 5.02s (exit 28), saying 'curl: (28) Operation timed out after 5001 milliseconds'"
        )
    }

    @Test func hangingLateSilentOrCrashingFails() {
        let check = StaysUsableCheck(givesUpWithin: .seconds(Int64(15)))
        let hung = Checks.staysUsable(check, self.evidence([], exit: .signaled(15), timedOut: true))
        #expect(!hung.passed)
        #expect(hung.evidence == "still running at its 60 s deadline (need it to end by itself within 15 s)")
        var late = self.evidence([], exit: .exited(0))
        late.duration = 45.3
        #expect(
            Checks.staysUsable(check, late).evidence
                == "ended by itself after 45.30s (exit 0) — that is later than 15 s")
        let silent = Checks.staysUsable(check, self.evidence([], exit: .exited(4)))
        #expect(!silent.passed)
        #expect(silent.evidence.hasSuffix("it failed with nothing on stderr (need a message saying why)"))
        var crashed = self.evidence([], exit: .signaled(11))
        crashed.stderrTail = "Segmentation fault\n"
        #expect(Checks.staysUsable(check, crashed).evidence.hasSuffix("killed by signal 11 (a crash, not a report)"))
    }

    @Test func stepsByLinesWithinBudget() {
        var evidence = self.evidence([])
        evidence.lines = [
            Line(at: 0.9, text: "loaded page 1"), Line(at: 1.0, text: "debug"), Line(at: 2.4, text: "loaded page 2"),
            Line(at: 7.9, stderr: true, text: "loaded page 3"),
        ]
        let check = StaysUsableCheck(steps: .lines("^loaded "), budget: .seconds(Int64(3)), minSteps: 3)
        let result = Checks.staysUsable(check, evidence)
        #expect(!result.passed)
        #expect(
            result.evidence
                == "3 steps (lines matching '^loaded '), slowest 5.50s: 'loaded page 3' at +7.90s — 1 step over the 3 s budget"
        )
        evidence.lines.removeLast()
        let few = Checks.staysUsable(check, evidence)
        #expect(few.evidence.hasSuffix("2 of the 3 steps needed"), "\(few.evidence)")
        evidence.lines.append(Line(at: 4.0, text: "loaded page 3"))
        #expect(Checks.staysUsable(check, evidence).passed)
        var whole = check
        whole.within = .seconds(Int64(3))
        #expect(
            Checks.staysUsable(whole, evidence).evidence.hasSuffix(
                "the last step ended at +4.00s (need all within 3 s)"))
        whole.within = .seconds(Int64(5))
        #expect(Checks.staysUsable(whole, evidence).evidence.contains("; all done by +4.00s"))
    }

    @Test func stepsByRequestsWithinBudget() {
        let requests = [
            Request(at: 0.5, path: "/files/a.css", status: 200, bodyBytesSent: 10, ended: 1.0),
            Request(at: 1.1, path: "/files/b.js", status: 200, bodyBytesSent: 10, ended: 4.6),
            Request(at: 1.2, path: "/api/x", status: 200, bodyBytesSent: 10, ended: 9.0),
        ]
        let check = StaysUsableCheck(steps: .requests("/files/*"), budget: .seconds(Int64(3)))
        let result = Checks.staysUsable(check, self.evidence(requests))
        #expect(!result.passed)
        #expect(
            result.evidence
                == "2 steps (requests for /files/*), slowest 3.50s: GET /files/b.js at +1.10s — 1 step over the 3 s budget"
        )
        let broken = Checks.staysUsable(
            check, self.evidence([Request(at: 0.5, path: "/files/a.css", status: 503, bodyBytesSent: 10, ended: 0.6)]))
        #expect(broken.evidence.contains("GET /files/a.css at +0.50s failed (503)"), "\(broken.evidence)")
    }

    /// `host:` judges one destination: the slow API's request is no step of the static host's.
    @Test func stepsByRequestsToOneHost() {
        var requests = [
            Request(at: 0.5, path: "/files/a.jpg", status: 200, bodyBytesSent: 10, ended: 0.9),
            Request(at: 0.6, path: "/files/profile.json", status: 200, bodyBytesSent: 10, ended: 8.0),
        ]
        requests[0].host = "static.netcond.test"
        requests[1].host = "api.netcond.test"
        var check = StaysUsableCheck(steps: .requests("/files/*"), budget: .seconds(Int64(2)))
        check.host = "static.*"
        let result = Checks.staysUsable(check, self.evidence(requests))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.evidence.hasPrefix("1 step (requests for /files/* to static.*)"), "\(result.evidence)")
        check.host = nil
        #expect(!Checks.staysUsable(check, self.evidence(requests)).passed)
    }

    // MARK: completes

    @Test func completesComparesTheFileByteForByte() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-checks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = Data(DeterministicBytesReference.bytes(seed: 7, count: 1_000_000))
        try good.write(to: directory.appendingPathComponent("ok.bin"))
        var bad = good
        bad[123_456] ^= 0xFF
        try bad.write(to: directory.appendingPathComponent("bad.bin"))
        try good.prefix(500_000).write(to: directory.appendingPathComponent("short.bin"))
        try Data("<html><body>Log in to Hotel Wi-Fi</body></html>".utf8).write(
            to: directory.appendingPathComponent("portal.bin"))
        try Data("cannot connect to origin.netcond.test:80: connection refused (netcond outage)\n".utf8)
            .write(to: directory.appendingPathComponent("error.txt"))

        func run(_ output: String, exit: NetcondScenario.ExitStatus = .exited(0), timedOut: Bool = false) -> CheckResult
        {
            Checks.completes(
                CompletesCheck(files: [OutputFile(output: output, file: "big.bin")]),
                self.evidence([], exit: exit, timedOut: timedOut, directory: directory.path))
        }
        #expect(run("ok.bin").passed)
        #expect(run("ok.bin").evidence == "exit 0 after 3.50s; ok.bin: 1,000,000 bytes identical to /files/big.bin")
        #expect(run("bad.bin").evidence.contains("differs from /files/big.bin at byte 123,456"))
        #expect(run("short.bin").evidence.contains("500,000 of 1,000,000 bytes (short)"))
        #expect(run("portal.bin").evidence.contains("(it looks like an HTML page)"))
        #expect(
            run("error.txt").evidence.hasSuffix(
                "differs from /files/big.bin at byte 0 (it starts \"cannot connect to origin.netcond.test:80: connection refused…\")"
            ),
            "\(run("error.txt").evidence)")
        #expect(!run("missing.bin").passed)
        #expect(run("missing.bin").evidence.contains("missing.bin: missing (the client wrote no such file)"))
        #expect(!run("ok.bin", exit: .exited(18)).passed)
        #expect(run("ok.bin", exit: .exited(18)).evidence == "exit 18 after 3.50s (need exit 0)")
        #expect(
            run("ok.bin", exit: .signaled(9), timedOut: true).evidence.contains("still running at its 60 s deadline"))
    }

    /// netcond may run as root: a client's output that is a link (to a secret, or to /dev/zero) or a
    /// pipe is not read, and says why; reading it would quote another file or never end.
    @Test func onlyARegularFileTheClientWroteIsRead() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-checks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = directory.appendingPathComponent("secret")
        try Data("root:secret\n".utf8).write(to: secret)
        try FileManager.default.createSymbolicLink(
            atPath: directory.appendingPathComponent("linked.bin").path, withDestinationPath: secret.path)
        try FileManager.default.createSymbolicLink(
            atPath: directory.appendingPathComponent("zero.bin").path, withDestinationPath: "/dev/zero")
        #expect(mkfifo(directory.appendingPathComponent("pipe.bin").path, 0o600) == 0)

        func run(_ output: String) -> CheckResult {
            Checks.completes(
                CompletesCheck(files: [OutputFile(output: output, file: "big.bin")]),
                self.evidence([], exit: .exited(0), directory: directory.path))
        }
        for name in ["linked.bin", "zero.bin"] {
            #expect(!run(name).passed)
            #expect(
                run(name).evidence.contains("\(name): a symbolic link, not a file the client wrote"),
                "\(run(name).evidence)")
            #expect(!run(name).evidence.contains("root:secret"))
        }
        #expect(run("pipe.bin").evidence.contains("pipe.bin: not a regular file"))
        // A subfolder of the output's name that is a link elsewhere (here, to the secret's folder's twin).
        let elsewhere = directory.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        try Data("root:secret\n".utf8).write(to: elsewhere.appendingPathComponent("out.bin"))
        try FileManager.default.createSymbolicLink(
            atPath: directory.appendingPathComponent("data").path, withDestinationPath: elsewhere.path)
        #expect(
            run("data/out.bin").evidence.contains("data/out.bin: in a folder reached through a symbolic link"),
            "\(run("data/out.bin").evidence)")
        #expect(!run("data/out.bin").evidence.contains("root:secret"))
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("real"), withIntermediateDirectories: true)
        try Data("root:secret\n".utf8).write(to: directory.appendingPathComponent("real/out.bin"))
        #expect(
            run("real/out.bin").evidence.contains("differs from /files/big.bin at byte 0 (it starts \"root:secret"),
            "\(run("real/out.bin").evidence)")
        // A link deeper down is met on the way, step by step from the working folder (each step opened
        // relative to the one before, never through a link: nothing can be swapped in between).
        try FileManager.default.createSymbolicLink(
            atPath: directory.appendingPathComponent("real/inner").path, withDestinationPath: elsewhere.path)
        #expect(
            run("real/inner/out.bin").evidence.contains(
                "real/inner/out.bin: in a folder reached through a symbolic link"),
            "\(run("real/inner/out.bin").evidence)")
        #expect(run("real/../real/out.bin").evidence.contains("missing"), "no step out of the working folder")
        #expect(Checks.find(Array("root".utf8), inFileAt: directory.appendingPathComponent("linked.bin").path) == nil)
        #expect(Checks.find(Array("x".utf8), inFileAt: directory.appendingPathComponent("pipe.bin").path) == nil)
        #expect(Checks.find(Array("root".utf8), inFileAt: secret.path) == 0)
        // Run as another user, the client's files must be that user's: a hard link it made to a file
        // it could not read (or any file not its own) is refused, not quoted.
        let mine = directory.appendingPathComponent("mine.bin")
        try Data("root:secret\n".utf8).write(to: mine)
        var asOther = self.evidence([], exit: .exited(0), directory: directory.path)
        asOther.clientUser = getuid() &+ 1
        let other = Checks.completes(CompletesCheck(files: [OutputFile(output: "mine.bin", file: "big.bin")]), asOther)
        #expect(
            other.evidence.contains(
                "mine.bin: not the client's own file (its owner is user \(getuid()), the client ran as user \(getuid() &+ 1)"
            ),
            "\(other.evidence)")
        #expect(!other.evidence.contains("root:secret"))
        #expect(Checks.find(Array("root".utf8), inFileAt: mine.path, in: asOther.clientFolder) == nil)
        asOther.clientUser = getuid()
        #expect(
            Checks.find(Array("root".utf8), inFileAt: mine.path, in: asOther.clientFolder) == 0, "its own file is read")
    }
}

/// The origin's byte stream, computed independently (SplitMix64 in counter mode, little-endian).
enum DeterministicBytesReference {
    static func bytes(seed: UInt64, count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count + 8)
        var word: UInt64 = 0
        while out.count < count {
            word += 1
            var z = seed &+ word &* 0x9E37_79B9_7F4A_7C15
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            withUnsafeBytes(of: z.littleEndian) { out.append(contentsOf: $0) }
        }
        return Array(out.prefix(count))
    }
}

/// What the checks say about their own fidelity, and `completes` for an endpoint.
@Suite struct FidelityChecksTests {
    typealias Request = RunEvidence.Request

    func evidence(_ requests: [Request], failedConnects: [RunEvidence.FailedConnect] = [], exit: Int32 = 0)
        -> RunEvidence
    {
        RunEvidence(
            exit: .exited(exit), timedOut: false, deadline: .seconds(60), duration: 3.5, requests: requests,
            failedConnects: failedConnects, workingDirectory: "/nonexistent", origin: OriginContent()
        )
    }

    static let lostThenReplayed = [
        Request(
            at: 0.2, method: "POST", path: "/api/orders", idempotencyKey: "k", status: nil, completed: false,
            effect: .created(1)),
        Request(at: 1.4, method: "POST", path: "/api/orders", idempotencyKey: "k", status: 200, effect: .replayed(1)),
    ]

    @Test func completesForAnEndpointNeedsASuccessfulLastAnswer() {
        let check = CompletesCheck(endpoint: "orders")
        let good = Checks.evaluate(.completes(check), self.evidence(Self.lostThenReplayed))
        #expect(good.passed, "\(good.evidence)")
        #expect(good.evidence == "exit 0 after 3.50s; its last call (POST /api/orders at +1.40s) got 200")
        // Exit 0, but the only call's response was lost: the client never completed.
        let lost = Checks.evaluate(.completes(check), self.evidence(Array(Self.lostThenReplayed.prefix(1))))
        #expect(!lost.passed)
        #expect(
            lost.evidence
                == "exit 0 after 3.50s, but its last call (POST /api/orders at +0.20s) got no answer after the origin did the work: the connection closed without a response"
        )
        let error = Checks.evaluate(
            .completes(check),
            self.evidence([
                Request(at: 0.5, method: "POST", path: "/api/orders", status: 503)
            ]))
        #expect(!error.passed && error.evidence.hasSuffix("got 503"), "\(error.evidence)")
        let never = Checks.evaluate(.completes(check), self.evidence([]))
        #expect(!never.passed && never.evidence.hasSuffix("it never called /api/orders"), "\(never.evidence)")
    }

    @Test func checksThatRestOnFailedConnectsSaySo() {
        let refused = (0..<3).map {
            RunEvidence.FailedConnect(at: Double($0), host: "origin.netcond.test", port: 80, outcome: .refused)
        }
        let swallowed = [RunEvidence.FailedConnect(at: 4, host: "", port: 0, outcome: .noAnswer)]
        var evidence = self.evidence([Request(at: 7, path: "/files/x")], failedConnects: refused + swallowed)
        // Without a blackhole the link recorded, a swallowed attempt is not said to be one.
        #expect(
            Checks.evaluate(.backsOff(BacksOffCheck()), evidence).caveat?.contains(
                "1 attempt the link held without an answer met a connection netcond accepted at once") == true)
        evidence.linkEvents = [RunEvidence.LinkEvent(at: 3.5, kind: .link, detail: "link: lte, outage (blackhole)")]
        let backsOff = Checks.evaluate(.backsOff(BacksOffCheck()), evidence)
        #expect(
            backsOff.caveat?.hasPrefix("through the proxy, 3 refused connections reached the client as a reset")
                == true, "\(backsOff.caveat ?? "")")
        #expect(
            backsOff.caveat?.contains("1 attempt into a blackhole met a connection netcond accepted at once") == true)
        #expect(Checks.evaluate(.completes(CompletesCheck()), evidence).caveat != nil)
        // Checks that do not judge connection failures, and runs without any, carry none.
        #expect(Checks.evaluate(.idempotent(IdempotentCheck(api: "orders")), evidence).caveat == nil)
        #expect(
            Checks.evaluate(.backsOff(BacksOffCheck()), self.evidence([Request(at: 7, path: "/files/x")])).caveat == nil
        )
        // The packet engine shows the client these failures itself: no caveat there.
        evidence.engine = .packet
        #expect(Checks.evaluate(.backsOff(BacksOffCheck()), evidence).caveat == nil)
    }

    @Test func whereThePacketEnginesLinkFellShortEveryVerdictSaysSo() {
        var summary = PacketSummary()
        #expect(packetShortfalls(summary).isEmpty)
        summary.kernelDrops = 2
        summary.passedUnseen = 1
        summary.letGoTooSoon = 3
        for _ in 0..<40 { summary.lateness.record(.milliseconds(2)) }
        let shortfalls = packetShortfalls(summary)
        // Lateness is not a shortfall: timed checks allow for a loaded machine.
        #expect(
            shortfalls == [
                "the kernel dropped packets netcond could not read in time, 2 times (the client met more loss)",
                "3 packets let go before the link decided (the client met a better link)",
                "1 packet the kernel passed that netcond never saw (the evidence misses them)",
            ], "\(shortfalls)")
        var evidence = self.evidence([Request(at: 7, path: "/files/x")])
        evidence.engine = .packet
        #expect(Checks.evaluate(.completes(CompletesCheck()), evidence).caveat == nil)
        evidence.shortfalls = shortfalls
        // Every check, passed or failed, carries it: none judged the link the profile describes.
        for spec in [CheckSpec.completes(CompletesCheck()), .resumes(ResumesCheck(file: "x"))] {
            let result = Checks.evaluate(spec, evidence)
            #expect(
                result.caveat
                    == "netcond's link fell short of the profile: " + shortfalls.joined(separator: "; "),
                "\(result.caveat ?? "")")
        }
        let scenario = Scenario(
            name: "s", description: "", file: "Scenarios/s.yaml", profile: Profile(name: "lte"), timeline: [],
            origin: OriginContent(), client: ClientSpec(command: ["wget", "x"]), checks: [])
        let outcome = ScenarioOutcome(
            scenario: scenario, seed: 1, command: ["wget", "x"], evidence: evidence,
            results: [Checks.evaluate(.completes(CompletesCheck()), evidence)], applied: [], startup: 0,
            linkSummary: "", clientOutput: ClientOutput(tail: "", stderrTail: ""))
        let line = ScenarioReport.verdictLine(outcome, scenarioArgument: "s.yaml")
        #expect(line.hasSuffix("; netcond's link fell short of the profile, see ⚠)"), "\(line)")
        #expect(
            ScenarioReport.checkLines(outcome).contains { $0.hasPrefix("  ⚠ not exact: netcond's link fell short") })
    }

    @Test func aPOSTThatReachedTheOriginAfterItsClientHadClosedIsNamed() {
        var late = Request(at: 2.4, method: "POST", path: "/api/orders", status: nil, effect: .created(2))
        late.afterClientFIN = 1.9
        let result = Checks.evaluate(
            .idempotent(IdempotentCheck(api: "orders")),
            self.evidence([
                Request(at: 0.3, method: "POST", path: "/api/orders", status: nil, effect: .created(1)), late,
            ]))
        #expect(!result.passed)
        #expect(
            result.evidence.contains(
                "(+2.40s created #2, response lost, reached the origin 1.90s after its client had closed (it was already on the link)"
            ), "\(result.evidence)")
    }

    @Test func aConnectionHeldByTheLinkIsACaveatEvenWhenItWasMadeInTheEnd() {
        // One attempt that waited out an 8 s blackhole and then succeeded: no failed attempt at all,
        // yet a client with a connect time-out would have given up and retried on a network.
        var evidence = self.evidence([Request(at: 15.4, path: "/files/x")])
        evidence.heldConnects = [RunEvidence.HeldConnect(at: 0.05, heldFor: 15.27)]
        let caveat = Checks.evaluate(.backsOff(BacksOffCheck()), evidence).caveat ?? ""
        #expect(caveat.contains("1 connection to the origin was held up to 15 s by the link"), "\(caveat)")
        #expect(caveat.contains("curl's --connect-timeout"), "\(caveat)")
        #expect(Checks.evaluate(.completes(CompletesCheck()), evidence).caveat != nil)
        #expect(Checks.evaluate(.resumes(ResumesCheck(file: "x")), evidence).caveat == nil)
        evidence.engine = .packet
        #expect(Checks.evaluate(.backsOff(BacksOffCheck()), evidence).caveat == nil)
    }
}
