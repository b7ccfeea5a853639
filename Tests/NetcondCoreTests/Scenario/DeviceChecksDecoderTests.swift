import Testing

@testable import NetcondCore

/// The checks of a device that moves decode, and every mistake names file:line:column, the key and
/// what is allowed, in exactly these words.
@Suite struct DeviceChecksDecoderTests {
    static let file = "Scenarios/test.yaml"

    func decode(_ yaml: String) throws(ConfigError) -> Scenario {
        try ScenarioDecoder.decode(yaml: yaml, file: Self.file)
    }

    func error(_ yaml: String) -> String {
        do {
            _ = try self.decode(yaml)
            return "no error"
        } catch {
            return error.oneLine
        }
    }

    // MARK: revalidates

    @Test func revalidatesTakesTheClientsResourceOrOneNamed() throws {
        let api = try self.decode(
            "profile: 3g\norigin: {api: {feed: {}}}\nclient: {url: /api/feed}\nchecks: {revalidates: {min_fetches: 3}}\n"
        )
        #expect(api.checks == [.revalidates(RevalidatesCheck(target: .api("feed"), minFetches: 3))])
        let file = try self.decode(
            "profile: 3g\norigin: {files: {a: {size: 1KB}}}\nclient: {url: /files/a}\nchecks: {revalidates: {}}\n")
        #expect(file.checks == [.revalidates(RevalidatesCheck(target: .file("a")))])
        let named = try self.decode(
            "profile: 3g\norigin: {files: {a: {size: 1KB}}, api: {feed: {}}}\nchecks: {revalidates: {api: feed}}\n")
        #expect(named.checks == [.revalidates(RevalidatesCheck(target: .api("feed")))])
    }

    @Test(arguments: [
        (
            "profile: 3g\nchecks: {revalidates: {}}\n",
            "Scenarios/test.yaml:2:23: checks.revalidates: which resource? the client's url is not a file or a GET endpoint of the origin; allowed: file: NAME from origin.files or api: NAME from origin.api"
        ),
        (
            "profile: 3g\norigin: {api: {orders: {method: POST}}}\nchecks: {revalidates: {api: orders}}\n",
            "Scenarios/test.yaml:3:29: checks.revalidates.api: /api/orders is a POST endpoint; allowed: a GET endpoint from origin.api"
        ),
        (
            "profile: 3g\norigin: {api: {feed: {}}, files: {a: {size: 1KB}}}\nchecks: {revalidates: {file: a, api: feed}}\n",
            "Scenarios/test.yaml:3:38: checks.revalidates.api: file and api exclude each other; allowed: one of them (the resource fetched again)"
        ),
        (
            "profile: 3g\norigin: {api: {feed: {}}}\nclient: {url: /api/feed}\nchecks: {revalidates: {min_fetches: 1}}\n",
            "Scenarios/test.yaml:4:37: checks.revalidates.min_fetches: '1' is not how many fetches of the resource; allowed: a whole number 2…10000"
        ),
        (
            "profile: 3g\norigin: {api: {feed: {}}}\nclient: {url: /api/feed}\nchecks: {revalidates: {path: /api/feed}}\n",
            "Scenarios/test.yaml:4:24: checks.revalidates.path: unknown key 'path'; allowed keys: file, api, min_fetches"
        ),
    ])
    func revalidatesMistakes(yaml: String, message: String) {
        #expect(self.error(yaml) == message)
    }

    // MARK: overlaps

    @Test func overlapsDecodes() throws {
        let scenario = try self.decode(
            "profile: satellite-geo\nchecks: {overlaps: {requests: /files/*, host: Static.netcond.test, min_in_flight: 4, min_requests: 8}}\n"
        )
        #expect(
            scenario.checks == [
                .overlaps(
                    OverlapsCheck(requests: "/files/*", host: "static.netcond.test", minInFlight: 4, minRequests: 8))
            ])
        let plain = try self.decode("profile: satellite-geo\nchecks: {overlaps: {requests: /api/*}}\n")
        #expect(plain.checks == [.overlaps(OverlapsCheck(requests: "/api/*", minInFlight: 2, minRequests: 2))])
    }

    @Test(arguments: [
        (
            "profile: 3g\nchecks: {overlaps: {}}\n",
            "Scenarios/test.yaml:2:20: checks.overlaps: which requests? allowed: requests: GLOB, the origin paths of the independent requests (e.g. requests: /files/*)"
        ),
        (
            "profile: 3g\nchecks: {overlaps: {requests: files/*}}\n",
            "Scenarios/test.yaml:2:31: checks.overlaps.requests: 'files/*' is not a path; allowed: a glob starting with / (e.g. /files/*)"
        ),
        (
            "profile: 3g\nchecks: {overlaps: {requests: /files/*, min_in_flight: 1}}\n",
            "Scenarios/test.yaml:2:56: checks.overlaps.min_in_flight: '1' is not how many requests in flight at once; allowed: a whole number 2…1000"
        ),
        (
            "profile: 3g\nchecks: {overlaps: {requests: /files/*, min_in_flight: 4, min_requests: 3}}\n",
            "Scenarios/test.yaml:2:73: checks.overlaps.min_requests: min_requests 3 is fewer than min_in_flight 4; allowed: 4 or more"
        ),
        (
            "profile: 3g\nchecks: {overlaps: {requests: /files/*, host: 'a b'}}\n",
            "Scenarios/test.yaml:2:47: checks.overlaps.host: 'a b' is not a host name; allowed: a name or glob such as static.netcond.test"
        ),
        (
            "profile: 3g\nchecks: {overlaps: {requests: /files/*, in_flight: 4}}\n",
            "Scenarios/test.yaml:2:41: checks.overlaps.in_flight: unknown key 'in_flight'; allowed keys: requests, host, min_in_flight, min_requests"
        ),
    ])
    func overlapsMistakes(yaml: String, message: String) {
        #expect(self.error(yaml) == message)
    }

    // MARK: delivers

    static let offline = """
        profile: lte
        timeline:
          - {at: 1s, outage: refuse}
          - {at: 6s, outage: end}
        origin: {api: {changes: {method: POST}}}
        client: {url: /api/changes}

        """

    @Test func deliversDecodesWithTheMomentTheNetworkComesBack() throws {
        let scenario = try self.decode(Self.offline + "checks: {delivers: {count: 5, within: 4s}}\n")
        #expect(
            scenario.checks == [
                .delivers(
                    DeliversCheck(
                        api: "changes", count: 5, within: .seconds(Int64(4)), returnsAt: .seconds(Int64(6))))
            ])
        let defaults = try self.decode(Self.offline + "checks: {delivers: {api: changes, count: 1}}\n")
        #expect(
            defaults.checks == [.delivers(DeliversCheck(api: "changes", count: 1, returnsAt: .seconds(Int64(6))))])
    }

    @Test(arguments: [
        (
            "checks: {delivers: {within: 4s}}\n",
            "Scenarios/test.yaml:7:20: checks.delivers: how many changes? allowed: count: N, the changes the client makes (each with an Idempotency-Key ending in its number, change-1 … change-N)"
        ),
        (
            "checks: {delivers: {count: 0}}\n",
            "Scenarios/test.yaml:7:28: checks.delivers.count: '0' is not how many changes the client makes; allowed: a whole number 1…10000"
        ),
        (
            "checks: {delivers: {count: 2, within: 2h}}\n",
            ""
        ),
        (
            "checks: {delivers: {count: 2, api: feed}}\n",
            "Scenarios/test.yaml:7:36: checks.delivers.api: unknown endpoint 'feed'; endpoints in origin.api: changes"
        ),
    ])
    func deliversMistakes(yaml: String, message: String) {
        let error = self.error(Self.offline + yaml)
        if message.isEmpty {
            #expect(error.hasPrefix("Scenarios/test.yaml:7:39: checks.delivers.within: "), "\(error)")
        } else {
            #expect(error == message)
        }
    }

    @Test func deliversNeedsTheNetworksReturnOnTheTimeline() {
        let error = self.error(
            "profile: lte\norigin: {api: {changes: {method: POST}}}\nclient: {url: /api/changes}\nchecks:\n  delivers: {count: 2}\n"
        )
        #expect(
            error
                == "Scenarios/test.yaml:5:13: checks.delivers: when is the network back? the timeline has no {at: T, outage: end}; allowed: an outage and its end at a moment (e.g. - {at: 1s, outage: refuse} and - {at: 6s, outage: end})"
        )
        let get = self.error(
            "profile: lte\norigin: {api: {feed: {}}}\nclient: {url: /api/feed}\nchecks: {delivers: {count: 2}}\n")
        #expect(
            get
                == "Scenarios/test.yaml:4:20: checks.delivers: which endpoint? the client's url is not a POST endpoint of origin.api; allowed: api: NAME"
        )
    }
}
