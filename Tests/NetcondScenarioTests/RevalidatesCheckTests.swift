import Testing

@testable import NetcondCore
@testable import NetcondScenario

/// `revalidates` on hand-made origin logs: a client that asks whether the feed changed passes with
/// the bytes it saved; one that downloads it again fails, naming the fetch.
@Suite struct RevalidatesCheckTests {
    typealias Request = RunEvidence.Request
    static let feed = RevalidatesCheck(target: .api("feed"), minFetches: 3)

    func evidence(_ requests: [Request]) -> RunEvidence {
        RunEvidence(
            exit: .exited(0), timedOut: false, deadline: .seconds(60), duration: 9, requests: requests,
            workingDirectory: "/nonexistent", origin: OriginContent(api: [OriginAPI(name: "feed")]))
    }

    func fetch(
        _ at: Double, _ status: Int?, bytes: Int64 = 12_345, condition: String? = nil, completed: Bool = true
    ) -> Request {
        var request = Request(
            at: at, path: "/api/feed", status: status, bodyBytesSent: status == 304 ? 0 : bytes, completed: completed,
            ended: at + 0.5)
        request.condition = condition
        return request
    }

    static let tag = "If-None-Match: \"api-0123456789abcdef\""

    /// `If-None-Match: *` is answered 304 whatever the client holds: no revalidation of its copy.
    @Test func aWildcardIsNoRevalidation() {
        let result = Checks.revalidates(
            Self.feed,
            self.evidence([
                self.fetch(0.2, 200), self.fetch(3.1, 304, condition: "If-None-Match: *"),
                self.fetch(6.0, 304, condition: Self.tag),
            ]))
        #expect(!result.passed)
        #expect(result.evidence.contains("asked with If-None-Match: *, which names no copy of its own"))
    }

    @Test func aClientThatRevalidatesPassesWithTheBytesSaved() {
        let result = Checks.revalidates(
            Self.feed,
            self.evidence([
                self.fetch(0.2, 200), self.fetch(3.1, 304, condition: Self.tag),
                self.fetch(6.0, 304, condition: "If-Modified-Since: Mon, 01 Jan 2024 00:00:00 GMT"),
            ]))
        #expect(result.passed, "\(result.evidence)")
        #expect(
            result.evidence == "3 fetches of /api/feed: 1 full (12,345 B), 2 revalidated → 304 (24,690 B saved)")
        #expect(result.details[1] == "+3.10s If-None-Match: \"api-0123456789abcdef\" → 304")
    }

    @Test func anUnconditionalSecondFetchFailsNamingIt() {
        let result = Checks.revalidates(
            Self.feed,
            self.evidence([self.fetch(0.2, 200), self.fetch(4.1, 200), self.fetch(7, 304, condition: Self.tag)]))
        #expect(!result.passed)
        #expect(result.evidence == "2nd fetch at 4.10s was unconditional: 12,345 B downloaded again")
    }

    @Test func aValidatorThatDoesNotMatchIsADownloadAgain() {
        let result = Checks.revalidates(
            Self.feed,
            self.evidence([
                self.fetch(0.2, 200), self.fetch(3, 200, condition: "If-None-Match: \"stale\""),
                self.fetch(6, 200, condition: "If-None-Match: \"stale\""),
            ]))
        #expect(!result.passed)
        #expect(
            result.evidence
                == "2nd fetch at 3.00s sent a validator that did not match (If-None-Match: \"stale\"): 12,345 B downloaded again (and 1 more)"
        )
    }

    @Test func noFetchAtAllFails() {
        let result = Checks.revalidates(Self.feed, self.evidence([]))
        #expect(!result.passed)
        #expect(result.evidence == "no GET of /api/feed reached the origin")
    }

    @Test func aClientThatClaimsACopyItNeverHadGetsNoCredit() {
        // `If-None-Match: *` from the start: the origin answers 304, but the client never had the
        // feed, so there is nothing it revalidated.
        let result = Checks.revalidates(
            Self.feed,
            self.evidence([
                self.fetch(0.2, 304, condition: "If-None-Match: *"), self.fetch(3, 304, condition: "If-None-Match: *"),
                self.fetch(6, 304, condition: "If-None-Match: *"),
            ]))
        #expect(!result.passed)
        #expect(result.evidence.hasPrefix("3 fetches of /api/feed, none of which brought the client a whole copy"))
    }

    @Test func aFirstFetchCutByTheLinkIsNoCopyAndADownloadAfterItIsTheFirstWholeOne() {
        var cut = self.fetch(0.2, 200)
        cut.undelivered = 10_000
        cut.linkCut = .reset
        let result = Checks.revalidates(
            Self.feed,
            self.evidence([
                cut, self.fetch(1, 200), self.fetch(3, 304, condition: Self.tag),
                self.fetch(6, 304, condition: Self.tag),
            ]))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.evidence.hasPrefix("4 fetches of /api/feed: 1 full (12,345 B), 2 revalidated"))
        #expect(result.details[0] == "+0.20s 200, 2,345 B (cut short)")
    }

    @Test func aConditionalFetchTheLinkCutIsNeitherCreditNorBlame() {
        let lost = self.fetch(3, nil, bytes: 0, condition: Self.tag, completed: false)
        let result = Checks.revalidates(
            Self.feed,
            self.evidence([
                self.fetch(0.2, 200), lost, self.fetch(4, 304, condition: Self.tag),
                self.fetch(6, 304, condition: Self.tag),
            ]))
        #expect(result.passed, "\(result.evidence)")
        #expect(result.details[1] == "+3.00s If-None-Match: \"api-0123456789abcdef\" → no answer (cut short)")
    }

    @Test func tooFewFetchesFail() {
        let result = Checks.revalidates(
            Self.feed, self.evidence([self.fetch(0.2, 200), self.fetch(3, 304, condition: Self.tag)]))
        #expect(!result.passed)
        #expect(
            result.evidence
                == "2 fetches of /api/feed: 1 full (12,345 B), 1 revalidated → 304 (12,345 B saved) — the client asked for it again too few times (min_fetches: 3, the whole copy and its revalidations)"
        )
        let once = Checks.revalidates(Self.feed, self.evidence([self.fetch(0.2, 200)]))
        #expect(!once.passed)
        #expect(
            once.evidence.hasSuffix(
                "— the client never asked for it again (min_fetches: 3, the whole copy and its revalidations)"))
    }

    @Test func aPOSTOrAnotherPathIsNoFetch() {
        var post = self.fetch(3, 201)
        post.method = "POST"
        var other = self.fetch(4, 200)
        other.path = "/api/other"
        let result = Checks.revalidates(Self.feed, self.evidence([self.fetch(0.2, 200), post, other]))
        #expect(!result.passed)
        #expect(result.evidence.hasPrefix("1 fetch of /api/feed:"))
    }

    @Test func theMarksAreEachFetch() {
        let evidence = self.evidence([self.fetch(0.2, 200), self.fetch(3.1, 304, condition: Self.tag)])
        #expect(Checks.marks(.revalidates(Self.feed), evidence) == [0.2, 3.1])
    }
}
