import Foundation
import NIOConcurrencyHelpers
import NetcondCore
import Testing

@testable import NetcondProxy

/// A text exposition read back as a scraper reads it: each family's type and help, each sample's
/// name, labels and value. Anything that does not parse fails the test.
struct ScrapedMetrics {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    var types: [String: String] = [:]
    var helps: [String: String] = [:]
    var samples: [Sample] = []

    init(_ bytes: [UInt8]) throws {
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let words = line.split(separator: " ", maxSplits: 3).map(String.init)
            if words.first == "#" {
                try #require(words.count == 4 && (words[1] == "TYPE" || words[1] == "HELP"), "\(line)")
                if words[1] == "TYPE" { self.types[words[2]] = words[3] } else { self.helps[words[2]] = words[3] }
                continue
            }
            try self.samples.append(Self.sample(String(line)))
        }
    }

    static func sample(_ line: String) throws -> Sample {
        let pattern = try NSRegularExpression(pattern: #"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$"#)
        let match = try #require(pattern.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)), "\(line)")
        func group(_ index: Int) -> String? {
            Range(match.range(at: index), in: line).map { String(line[$0]) }
        }
        var labels: [String: String] = [:]
        if let text = group(2) {
            let pair = try NSRegularExpression(pattern: #"([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)""#)
            for found in pair.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(found.range(at: 1), in: text)!])
                labels[name] = String(text[Range(found.range(at: 2), in: text)!])
            }
        }
        return Sample(name: group(1) ?? "", labels: labels, value: try #require(Double(group(3) ?? "")))
    }

    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        self.samples.first { $0.name == name && $0.labels == labels }?.value
    }
}

/// `GET /metrics` of the control API: the exposition parses, names follow Prometheus's
/// conventions, and each value is the one `/status` or `/routes` says now.
@Suite struct ControlMetricsTests {
    static func status(bytesDown: Int64 = 0, queueDrops: Int = 0) -> ControlStatus {
        ControlStatus(
            profile: "3g", phase: "3g", outage: nil, stalled: [], seed: 1, elapsedSeconds: 2.5, connectionsTotal: 3,
            connectionsOpen: 1, bytesUp: 100, bytesDown: bytesDown, bytesDelivered: bytesDown, segmentsSent: 40,
            segmentsLost: 2, queueDrops: queueDrops, outageDrops: 0, retransmissions: 2, resets: 0, closes: 0,
            refusedConnections: 0, upstreamFailures: 0, faults: 0, faultsApplied: 0, captivePortal: nil,
            timerWakeups: 0, timerLateUs: [], queueDelayMs: [5, 120],
            link: [
                ControlLinkNow(
                    .down, LinkMoment(rate: Bandwidth(bitsPerSecond: 8_000_000), delay: .milliseconds(150), loss: 0.01)),
                ControlLinkNow(.up, LinkMoment(rate: nil, delay: .milliseconds(150), loss: 0)),
            ],
            directions: [
                ControlDirectionCounters(
                    direction: .down, packets: 30, lost: 2, queueDrops: queueDrops, outageDrops: 0),
                ControlDirectionCounters(direction: .up, packets: 10, lost: 0, queueDrops: 0, outageDrops: 0),
            ])
    }

    static func route(_ name: String, down: Int64) -> ControlRoute {
        ControlRoute(
            name: name, match: "host cdn.example.com", state: LinkState(phase: "lte"),
            link: [ControlLinkNow(.down, LinkMoment(rate: nil, delay: .milliseconds(20), loss: 0))], connections: 1,
            bytesDown: down, bytesUp: 10)
    }

    @Test func everyFamilyHasItsTypeAndHelpAndFollowsTheNamingRules() throws {
        let exposition = MetricsExposition()
        let run = ScenarioCheckBoard.Run(
            scenario: "resume",
            checks: [.init(name: "completes", passed: true), .init(name: "completes", passed: false)])
        let samples = ControlMetrics.samples(
            status: Self.status(bytesDown: 5000), routes: [Self.route("cdn", down: 700)], checks: run)
        let scraped = try ScrapedMetrics(exposition.publish(samples))
        for sample in scraped.samples {
            #expect(sample.name.hasPrefix("netcond_"))
            let type = try #require(scraped.types[sample.name], "\(sample.name) has no TYPE")
            #expect(scraped.helps[sample.name] != nil, "\(sample.name) has no HELP")
            #expect(sample.name.hasSuffix("_total") == (type == "counter"), "\(sample.name) is a \(type)")
        }
        #expect(scraped.value("netcond_bytes_total", ["direction": "down"]) == 5000)
        #expect(scraped.value("netcond_bytes_total", ["direction": "up"]) == 100)
        #expect(scraped.value("netcond_dropped_packets_total", ["cause": "loss", "direction": "down"]) == 2)
        #expect(scraped.value("netcond_dropped_packets_total", ["cause": "loss", "direction": "up"]) == 0)
        #expect(scraped.value("netcond_packets_sent_total", ["direction": "down"]) == 30)
        #expect(scraped.value("netcond_packets_sent_total", ["direction": "up"]) == 10)
        #expect(scraped.value("netcond_route_bytes_total", ["route": "cdn", "direction": "down"]) == 700)
        #expect(scraped.value("netcond_link_delay_seconds", ["direction": "down"]) == 0.15)
        #expect(scraped.value("netcond_link_rate_bytes_per_second", ["direction": "down"]) == 1_000_000)
        // Unlimited: no series, rather than a number that means nothing.
        #expect(scraped.value("netcond_link_rate_bytes_per_second", ["direction": "up"]) == nil)
        #expect(scraped.value("netcond_queue_delay_seconds", ["direction": "down"]) == 0.12)
        #expect(scraped.value("netcond_connections_open") == 1)
        #expect(scraped.value("netcond_scenario_check_passed", ["check": "completes", "scenario": "resume"]) == 1)
        #expect(scraped.value("netcond_scenario_check_passed", ["check": "completes (2)", "scenario": "resume"]) == 0)
        #expect(scraped.value("netcond_scenario_checks", ["result": "failed"]) == 1)
    }

    @Test func countersFollowTheLinkAndAGoneRouteLeaves() throws {
        let exposition = MetricsExposition()
        let first = try ScrapedMetrics(
            exposition.publish(
                ControlMetrics.samples(
                    status: Self.status(bytesDown: 10), routes: [Self.route("cdn", down: 1)], checks: nil)))
        let second = try ScrapedMetrics(
            exposition.publish(
                ControlMetrics.samples(status: Self.status(bytesDown: 9000, queueDrops: 4), routes: [], checks: nil)))
        #expect(first.value("netcond_bytes_total", ["direction": "down"]) == 10)
        #expect(second.value("netcond_bytes_total", ["direction": "down"]) == 9000)
        #expect(first.value("netcond_dropped_packets_total", ["cause": "queue_overflow", "direction": "down"]) == 0)
        #expect(second.value("netcond_dropped_packets_total", ["cause": "queue_overflow", "direction": "down"]) == 4)
        #expect(first.value("netcond_route_bytes_total", ["route": "cdn", "direction": "down"]) == 1)
        #expect(!second.samples.contains { $0.name.hasPrefix("netcond_route_") })
        #expect(second.value("netcond_scenario_checks", ["result": "passed"]) == nil)
    }

    @Test func twoScrapesOfTheSameNumbersReadTheSame() {
        let samples = ControlMetrics.samples(
            status: Self.status(bytesDown: 10), routes: [Self.route("b", down: 1), Self.route("a", down: 2)],
            checks: nil)
        let exposition = MetricsExposition()
        let once = exposition.publish(samples)
        #expect(exposition.publish(samples) == once)
        #expect(MetricsExposition().publish(samples) == once)
    }

    /// Served: each scrape asks the target for its status then, so a counter moves with the bytes.
    @Test func aScrapeReadsTheTargetNow() async throws {
        let target = MovingTarget()
        let exposition = MetricsExposition()
        let before = try ScrapedMetrics(await ControlServer.metricsAnswer(target: target, exposition: exposition).json)
        target.bytes.withLockedValue { $0 += 4096 }
        let answer = await ControlServer.metricsAnswer(target: target, exposition: exposition)
        let after = try ScrapedMetrics(answer.json)
        #expect(answer.contentType.hasPrefix("text/plain; version=0.0.4"))
        #expect(before.value("netcond_bytes_total", ["direction": "down"]) == 0)
        #expect(after.value("netcond_bytes_total", ["direction": "down"]) == 4096)
        #expect(after.value("netcond_route_bytes_total", ["route": "cdn", "direction": "down"]) == 4096)
    }
}

/// A link whose bytes the test moves.
final class MovingTarget: ControlTarget {
    let bytes = NIOLockedValueBox<Int64>(0)

    func controlAnswer(_ route: ControlAPI.Route) async -> (status: Int, json: [UInt8]) {
        let bytes = self.bytes.withLockedValue { $0 }
        switch route {
        case .routes:
            return (200, ControlRoutes(routes: [ControlMetricsTests.route("cdn", down: bytes)]).controlJSON())
        default:
            return (200, ControlMetricsTests.status(bytesDown: bytes).controlJSON())
        }
    }
}
