import Foundation
import Testing

@testable import NetcondCore
@testable import NetcondScenario

/// `reconnects` on hand-made evidence: a handover at 2 s with a 2 s gap (the new network up at
/// 4 s) while a download was in flight; the client's requests after it decide the verdict.
@Suite struct ReconnectsCheckTests {
    typealias Request = RunEvidence.Request

    /// The download stranded at the handover: 300,000 of 1,000,000 body bytes reached the client.
    static var stranded: Request {
        var request = Request(at: 0.1, path: "/files/big.bin", status: 200, bodyBytesSent: 1_000_000, ended: 0.2)
        request.undelivered = 700_000
        return request
    }

    func judge(_ after: [Request], handovers: [RunEvidence.Handover]? = nil, check: ReconnectsCheck = ReconnectsCheck())
        -> CheckResult
    {
        var evidence = RunEvidence(
            exit: .exited(0), timedOut: false, deadline: .seconds(60), duration: 30, requests: [Self.stranded] + after,
            workingDirectory: "/nonexistent",
            origin: OriginContent(files: [OriginFile(name: "big.bin", size: ByteCount(bytes: 1_000_000), seed: 1)]))
        evidence.handovers = handovers ?? [RunEvidence.Handover(at: 2, gap: 2, to: "lte")]
        return Checks.reconnects(check, evidence)
    }

    @Test func aClientThatAsksForTheRestSoonAfterTheNetworkIsBackPasses() {
        let result = self.judge([
            Request(at: 6.5, path: "/files/big.bin", range: "bytes=300000-", status: 206, bodyBytesSent: 700_000)
        ])
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence
                == "handover at +2.00s (to lte, the new network up at +4.00s): GET /files/big.bin stranded; the client asked again within 10.00s of the network being up, and got it whole"
        )
        #expect(
            result.details == [
                "GET /files/big.bin: asked again at +6.50s, 2.50s after the network was up (Range: bytes=300000- → 206)"
            ])
    }

    @Test func aClientThatNeverAsksAgainFails() {
        let result = self.judge([])
        #expect(!result.passed)
        #expect(result.evidence.contains("was not asked again in the 26.00s after the network was up"))
        // Another request (a heartbeat, another host's) is not the stranded one asked again.
        let heartbeat = self.judge([Request(at: 5, path: "/api/ping", status: 200)])
        #expect(!heartbeat.passed && heartbeat.evidence.contains("was not asked again"))
    }

    @Test func aClientThatNoticesTooLateFails() {
        let result = self.judge([
            Request(at: 16, path: "/files/big.bin", range: "bytes=300000-", status: 206, bodyBytesSent: 700_000)
        ])
        #expect(!result.passed)
        #expect(
            result.evidence.contains(
                "asked for /files/big.bin again at +16.00s, 12.00s after the network was up; allowed ≤ 10.00s"))
    }

    @Test func aDownloadStartedAgainIsNotGoingOnFromWhereItWasUnlessAllowed() {
        let again = [Request(at: 6.5, path: "/files/big.bin", status: 200, bodyBytesSent: 1_000_000)]
        let result = self.judge(again)
        #expect(!result.passed)
        #expect(result.evidence.contains("it had 300,000 B of /files/big.bin and asked for it from the start → 200"))
        #expect(self.judge(again, check: ReconnectsCheck(resume: false)).passed)
        // A Range past what it had skips bytes: not from where it was either.
        let skipping = [
            Request(at: 6.5, path: "/files/big.bin", range: "bytes=500000-", status: 206, bodyBytesSent: 500_000)
        ]
        #expect(!self.judge(skipping).passed)
    }

    @Test func anAnswerCutShortAgainIsNotGoingOn() {
        var cut = Request(at: 6.5, path: "/files/big.bin", range: "bytes=300000-", status: 206, bodyBytesSent: 700_000)
        cut.undelivered = 10
        let result = self.judge([cut])
        #expect(!result.passed)
        #expect(result.evidence.contains("never got GET /files/big.bin answered whole after the handover"))
    }

    /// A closed range that stops short is not the rest; closed ranges that reach the end are; a 304
    /// to a conditional ask is whole.
    @Test func theRestMustReachTheLastByte() {
        let short = [
            Request(at: 6.5, path: "/files/big.bin", range: "bytes=300000-300010", status: 206, bodyBytesSent: 11)
        ]
        #expect(!self.judge(short).passed)
        let chunks = [
            Request(at: 6.5, path: "/files/big.bin", range: "bytes=300000-649999", status: 206, bodyBytesSent: 350_000),
            Request(at: 7.5, path: "/files/big.bin", range: "bytes=650000-999999", status: 206, bodyBytesSent: 350_000),
        ]
        #expect(self.judge(chunks).passed, "\(self.judge(chunks).evidence)")
        var conditional = Request(at: 6.5, path: "/files/big.bin", range: "bytes=300000-", status: 304)
        conditional.bodyBytesSent = 0
        #expect(self.judge([conditional]).passed)
    }

    /// A second handover with nothing in flight is not judged; the first's stranded request is not
    /// the second's.
    @Test func eachHandoverJudgesWhatItStranded() {
        let handovers = [
            RunEvidence.Handover(at: 2, gap: 2, to: "lte"), RunEvidence.Handover(at: 20, gap: 1, to: "wifi"),
        ]
        let resumed = [
            Request(at: 6.5, path: "/files/big.bin", range: "bytes=300000-", status: 206, bodyBytesSent: 700_000)
        ]
        let result = self.judge(resumed, handovers: handovers)
        #expect(result.passed, "\(result.evidence)")
        #expect(result.details.last == "nothing in flight at +20.00s: not judged")
    }

    @Test func noHandoverOrNothingInFlightJudgesNothing() {
        let none = self.judge([], handovers: [])
        #expect(!none.passed && none.evidence.hasPrefix("no handover happened in the run"))
        // A handover before the download started: nothing was in flight then.
        let early = self.judge([], handovers: [RunEvidence.Handover(at: 0.05, gap: 1, to: "lte")])
        #expect(!early.passed && early.evidence.hasPrefix("nothing was in flight at the handover (+0.05s)"))
    }
}
