import NIOConcurrencyHelpers
import NetcondCore

/// The control API's `GET /metrics`, as a pure function of what `GET /status` and `GET /routes`
/// answer: the same counters, read at the scrape, so a metric and the JSON never disagree and no
/// byte or drop is counted a second time. Both engines answer those two, so both get the metrics.
enum ControlMetrics {
    /// Every sample of one scrape, in a fixed order.
    static func samples(
        status: ControlStatus, routes: [ControlRoute], checks: ScenarioCheckBoard.Run?
    ) -> [MetricSample] {
        var samples = Self.traffic(status) + Self.link(status)
        for route in routes { samples += Self.route(route) }
        if let checks { samples += Self.checks(checks) }
        return samples
    }

    static func counter(
        _ name: String, _ unit: String, _ help: String, _ labels: [MetricSample.Label] = [], _ value: Int64
    )
        -> MetricSample
    {
        MetricSample(kind: .counter, name: name, unit: unit, help: help, labels: labels, value: Double(max(0, value)))
    }

    static func gauge(
        _ name: String, _ unit: String, _ help: String, _ labels: [MetricSample.Label] = [], _ value: Double
    )
        -> MetricSample
    {
        MetricSample(kind: .gauge, name: name, unit: unit, help: help, labels: labels, value: value)
    }

    static func label(_ name: String, _ value: String) -> MetricSample.Label {
        MetricSample.Label(name: name, value: value)
    }

    /// What crossed the link and what it dropped, and the connections.
    static func traffic(_ status: ControlStatus) -> [MetricSample] {
        let down = [Self.label("direction", "down")]
        let up = [Self.label("direction", "up")]
        let bytes = "Bytes carried to their end, each way (GET /status bytes_down, bytes_up)."
        return [
            Self.counter("bytes", "total", bytes, down, status.bytesDown),
            Self.counter("bytes", "total", bytes, up, status.bytesUp),
            Self.counter(
                "delivered_bytes", "total",
                "Down bytes the link has delivered to the clients' sockets (GET /status bytes_delivered).", down,
                status.bytesDelivered),
            Self.counter(
                "retransmissions", "total", "Segments the emulated senders sent again (proxy engine).", [],
                Int64(status.retransmissions)),
            Self.counter("connections", "total", "Connections opened so far.", [], Int64(status.connectionsTotal)),
            Self.gauge("connections", "open", "Connections open now.", [], Double(status.connectionsOpen)),
            Self.counter(
                "connection_resets", "total", "Connections reset by an outage or a cut.", [], Int64(status.resets)),
            Self.counter(
                "refused_connections", "total", "Connection attempts refused by an outage.", [],
                Int64(status.refusedConnections)),
            Self.counter(
                "upstream_failures", "total", "Connections to an upstream that failed.", [],
                Int64(status.upstreamFailures)),
            Self.counter(
                "faults_applied", "total", "Requests an HTTP fault hit.", [], Int64(status.faultsApplied)),
        ] + Self.spliced(status) + Self.packets(status.directions ?? [])
    }

    /// The forward connections the kernel relays (`/status`'s `spliced_open`, `spliced_total`;
    /// none where nothing is spliced).
    static func spliced(_ status: ControlStatus) -> [MetricSample] {
        guard let open = status.splicedOpen, let total = status.splicedTotal else { return [] }
        return [
            Self.counter(
                "spliced_connections", "total",
                "Forward connections the kernel relayed (splice), some back on netcond's loop since.", [],
                Int64(total)),
            Self.gauge(
                "spliced_connections", "open", "Forward connections the kernel relays now (splice).", [], Double(open)),
        ]
    }

    /// Each direction's packets and drops by cause (`/status`'s `directions`).
    static func packets(_ directions: [ControlDirectionCounters]) -> [MetricSample] {
        let sent = "Packets (segments under the proxy engine) put on the link, retransmissions included."
        let drops =
            "Packets (segments under the proxy engine) the link dropped, by cause: loss (the profile's loss "
            + "process), queue_overflow (a full bottleneck queue or its AQM), outage (an outage or a blackhole)."
        var samples: [MetricSample] = []
        for counts in directions {
            let direction = Self.label("direction", counts.direction)
            samples.append(Self.counter("packets_sent", "total", sent, [direction], Int64(counts.packets)))
            let causes = [("loss", counts.lost), ("queue_overflow", counts.queueDrops), ("outage", counts.outageDrops)]
            for (cause, count) in causes {
                samples.append(
                    Self.counter(
                        "dropped_packets", "total", drops, [Self.label("cause", cause), direction], Int64(count)))
            }
        }
        return samples
    }

    /// The conditions in force now: delay, rate, loss and queueing each way, and the outage.
    static func link(_ status: ControlStatus) -> [MetricSample] {
        var samples = Self.conditions(status.link ?? [], extra: [])
        // `/status` lists the queue delay up, then down.
        for (direction, ms) in zip(["up", "down"], status.queueDelayMs ?? []) {
            samples.append(
                Self.gauge(
                    "queue_delay", "seconds",
                    "How long a byte queued now waits at the bottleneck before it goes (the queue's depth, in time).",
                    [Self.label("direction", direction)], ms / 1000))
        }
        samples.append(
            Self.gauge(
                "outage", "active", "1 while an outage (blackhole, refuse or reset) is in force.", [],
                status.outage == nil ? 0 : 1))
        samples.append(
            Self.gauge(
                "elapsed", "seconds", "Seconds since the run started (its profile's schedule).", [],
                status.elapsedSeconds))
        samples.append(
            Self.gauge(
                "link", "info", "The profile, its phase and the engine now (the value is always 1).",
                [
                    Self.label("engine", status.engine ?? "proxy"), Self.label("phase", status.phase),
                    Self.label("profile", status.profile),
                ], 1))
        return samples
    }

    /// Each direction's delay, rate (absent while unlimited) and loss; `extra` labels (a route's) go first.
    static func conditions(_ link: [ControlLinkNow], extra: [MetricSample.Label]) -> [MetricSample] {
        let prefix = extra.isEmpty ? "link" : "route"
        var samples: [MetricSample] = []
        for now in link {
            let labels = extra + [Self.label("direction", now.direction)]
            samples.append(
                Self.gauge(prefix + "_delay", "seconds", "One-way delay in force.", labels, now.delayMs / 1000))
            if let bps = now.rateBps {
                samples.append(
                    Self.gauge(
                        prefix + "_rate", "bytes_per_second", "Rate in force (no series while unlimited).", labels,
                        Double(bps) / 8))
            }
            samples.append(
                Self.gauge(prefix + "_loss", "ratio", "The probability a packet offered now is lost.", labels, now.loss)
            )
        }
        return samples
    }

    /// One route (`GET /routes`): its bytes each way, its connections, its link now.
    static func route(_ route: ControlRoute) -> [MetricSample] {
        let name = [Self.label("route", route.name)]
        let bytes = "Bytes a route's connections carried to their end, each way (GET /routes bytes_down, bytes_up)."
        return [
            Self.counter("route_bytes", "total", bytes, name + [Self.label("direction", "down")], route.bytesDown),
            Self.counter("route_bytes", "total", bytes, name + [Self.label("direction", "up")], route.bytesUp),
            Self.counter(
                "route_connections", "total", "Connections that took a route.", name, Int64(route.connections)),
            Self.gauge(
                "route_outage", "active", "1 while an outage is in force on a route.", name,
                route.outage == nil ? 0 : 1),
        ] + Self.conditions(route.link, extra: name)
    }

    /// The last scenario run's checks: 1 passed, 0 failed; a name given twice gets ` (2)`.
    static func checks(_ run: ScenarioCheckBoard.Run) -> [MetricSample] {
        var seen: [String: Int] = [:]
        var samples: [MetricSample] = []
        for check in run.checks {
            seen[check.name, default: 0] += 1
            let count = seen[check.name] ?? 1
            let name = count == 1 ? check.name : "\(check.name) (\(count))"
            samples.append(
                Self.gauge(
                    "scenario_check", "passed",
                    "The last scenario run's checks in this process: 1 passed, 0 failed.",
                    [Self.label("check", name), Self.label("scenario", run.scenario)], check.passed ? 1 : 0))
        }
        let passed = run.checks.filter(\.passed).count
        let results = "How many checks of the last scenario run passed and failed."
        samples.append(
            Self.gauge("scenario_checks", "", results, [Self.label("result", "passed")], Double(passed)))
        samples.append(
            Self.gauge(
                "scenario_checks", "", results, [Self.label("result", "failed")],
                Double(run.checks.count - passed)))
        return samples
    }
}

/// The checks of the last scenario this process ran, for `/metrics`. Process-wide on purpose: a
/// run's control server stops with its run, so only a later run's server (a suite's next scenario)
/// can say how the last one went; the runner posts each verdict here as it is judged.
public final class ScenarioCheckBoard: Sendable {
    public struct Check: Equatable, Sendable {
        public var name: String
        public var passed: Bool

        public init(name: String, passed: Bool) {
            self.name = name
            self.passed = passed
        }
    }

    public struct Run: Equatable, Sendable {
        public var scenario: String
        public var checks: [Check]

        public init(scenario: String, checks: [Check]) {
            self.scenario = scenario
            self.checks = checks
        }
    }

    public static let shared = ScenarioCheckBoard()
    private let last = NIOLockedValueBox<Run?>(nil)

    public func record(_ run: Run) {
        self.last.withLockedValue { $0 = run }
    }

    public var lastRun: Run? { self.last.withLockedValue { $0 } }
}
