import Testing

@testable import NetcondCore
@testable import NetcondOrigin
@testable import NetcondProxy
@testable import NetcondScenario

/// The runner's rules in virtual time: which timeline events are due when, and how the proxy's and
/// the origin's records become the evidence the checks judge.
@Suite struct TimelinePlayerTests {
    let timeline = [
        ScenarioEvent(trigger: .at(.seconds(2)), action: .outage(.blackhole)),
        ScenarioEvent(trigger: .afterRequests(1, of: .file("big.bin")), action: .captive(open: false)),
        ScenarioEvent(trigger: .at(.seconds(2)), action: .outage(nil)),
        ScenarioEvent(trigger: .afterBytes(ByteCount(bytes: 300_000)), action: .cut(.reset)),
    ]

    @Test func eachEventWaitsForItsOwnTriggerAndTiesApplyInFileOrder() {
        var player = TimelinePlayer(self.timeline)
        #expect(player.watchesOrigin && player.watchesLink)
        #expect(player.takeDue(elapsed: .milliseconds(1999)).isEmpty)
        // Marks are polled while watched, unless the next `at:` comes sooner.
        #expect(player.wait(elapsed: .milliseconds(1500)) == TimelinePlayer.markPoll)
        #expect(player.wait(elapsed: .milliseconds(1999)) == .milliseconds(1))
        #expect(player.takeDue(elapsed: .seconds(2)).map(\.action) == [.outage(.blackhole), .outage(nil)])
        #expect(player.takeDue(elapsed: .seconds(3), finished: 1, finishedFor: [.file("other.bin"): 1]).isEmpty)
        #expect(
            player.takeDue(elapsed: .seconds(3), finished: 1, finishedFor: [.file("big.bin"): 1]).map(\.action) == [
                .captive(open: false)
            ])
        #expect(!player.watchesOrigin && player.watchesLink)
        #expect(player.takeDue(elapsed: .seconds(4), delivered: 299_999).isEmpty)
        #expect(player.takeDue(elapsed: .seconds(4), delivered: 300_000).map(\.action) == [.cut(.reset)])
        #expect(player.isFinished && player.wait(elapsed: .seconds(4)) == nil)
    }

    @Test func withoutMarksItSleepsUntilTheNextMoment() {
        var player = TimelinePlayer([
            ScenarioEvent(trigger: .at(.seconds(6)), action: .outage(nil)),
            ScenarioEvent(trigger: .at(.seconds(0)), action: .outage(.refuse)),
        ])
        #expect(player.takeDue(elapsed: .zero).map(\.action) == [.outage(.refuse)])
        #expect(player.wait(elapsed: .milliseconds(500)) == .milliseconds(5500))
        #expect(player.wait(elapsed: .seconds(7)) == .zero)
    }
}

@Suite struct EvidenceAssemblerTests {
    /// The client started 1 s after the proxy's log began (uptime 11 s vs 10 s).
    let assembler = EvidenceAssembler(clientStart: 11_000_000_000, logStart: 10_000_000_000)

    @Test func attemptsThatNeverReachedTheOriginAreTypedAndOnTheClientsClock() {
        let events = [
            ProxyEvent(at: 1.5, kind: .connect, detail: "x", host: "origin.netcond.test", port: 80, attempt: .refused),
            ProxyEvent(at: 2.5, kind: .connect, detail: "x", host: "elsewhere.example", port: 80, attempt: .refused),
            ProxyEvent(at: 3.5, kind: .client, detail: "x", attempt: .noAnswer),
            ProxyEvent(
                at: 4.5, kind: .connect, detail: "x", host: "ORIGIN.netcond.test", port: 443, attempt: .abandoned),
            ProxyEvent(at: 5.0, kind: .link, detail: "link: refused everything (wording is not read)"),
        ]
        let attempts = self.assembler.failedConnects(events)
        #expect(
            attempts == [
                RunEvidence.FailedConnect(at: 0.5, host: "origin.netcond.test", port: 80, outcome: .refused),
                RunEvidence.FailedConnect(at: 2.5, host: "", port: 0, outcome: .noAnswer),
                RunEvidence.FailedConnect(at: 3.5, host: "ORIGIN.netcond.test", port: 443, outcome: .abandoned),
            ])
    }

    @Test func portalEventsComeFromTheirTypeNotTheirText() {
        let events = [
            ProxyEvent(at: 2, kind: .captive, detail: "portal opened: looks like an answer", portal: .answered),
            ProxyEvent(at: 3, kind: .captive, detail: "something else entirely", portal: .opened),
        ]
        #expect(self.assembler.portal(events).map(\.kind) == [.answered, .opened])
        #expect(self.assembler.portal(events).map(\.at) == [1, 2])
    }

    @Test func requestsAreTimedFromTheClientsStartWithWhatReachedIt() {
        let entry = OriginRequestLog.Entry(
            id: 0, connection: 0, timestamp: Instant(nanoseconds: 12_500_000_000), method: "GET",
            target: "/files/big.bin",
            headers: .init(), status: 200, retryAfter: nil, bodyBytesSent: 1000, completed: true, isFinished: true,
            finishedAt: Instant(nanoseconds: 13_000_000_000), effect: nil)
        let connection = OriginRequestLog.Connection(
            id: 0, peerPort: 40_000, tls: false, openedAt: Instant(nanoseconds: 12_400_000_000), bytesWritten: 1200)
        // The link cut the connection with 700 of its 1,200 bytes delivered.
        let cut = ProxyEvent(
            at: 4, kind: .delivered, detail: "x", cut: .reset, localPort: 40_000, bytes: 700, connectedAt: 2.4)
        let requests = self.assembler.requests(events: [cut], entries: [entry], connections: [connection])
        #expect(requests.count == 1)
        #expect(requests[0].at == 1.5 && requests[0].ended == 2)
        #expect(requests[0].undelivered == 500 && requests[0].linkCut == .reset)
        #expect(requests[0].bodyBytesReceived == 500)
    }
}
