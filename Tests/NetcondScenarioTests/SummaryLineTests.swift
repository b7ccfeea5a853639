import Testing

@testable import NetcondCore
@testable import NetcondProxy
@testable import NetcondScenario

/// The one line `netcond run` and `netcond proxy` print at the end.
@Suite struct SummaryLineTests {
    func summary(link: LinkCounters = LinkCounters(), lateness: [Span] = []) -> ProxySummary {
        var timer = LatenessHistogram()
        for late in lateness { timer.record(late) }
        return ProxySummary(
            connections: 2, bytesUp: 616, bytesDown: 21_200, upstreamFailures: 0, badRequests: 0, link: link,
            timerLateness: timer
        )
    }

    @Test func namesTheProfileTotalsAndSeed() {
        let text = Session.summaryText(profile: "lte", seed: 5, elapsed: .milliseconds(3200), summary: self.summary())
        #expect(text == "lte: 3.2 s, up 616 B, down 20.7 KB, 2 connections, no segment lost (seed 5)")
    }

    @Test func saysWhenNetcondItselfWasHeldUp() {
        // Wake-ups up to 20 ms late are the machine's usual jitter and go unmentioned.
        let quiet = self.summary(lateness: [.microseconds(40), .milliseconds(19)])
        #expect(!Session.summaryText(profile: "lte", seed: 5, elapsed: .seconds(1), summary: quiet).contains("held up"))
        let held = self.summary(lateness: [.microseconds(40), .milliseconds(57), .milliseconds(31)])
        let text = Session.summaryText(profile: "lte", seed: 5, elapsed: .seconds(1), summary: held)
        #expect(
            text.contains(
                "netcond was held up 2 times for over 20 ms (longest 57 ms): the machine is overloaded and the link's "
                    + "timing was off by as much"
            ))
    }
}
