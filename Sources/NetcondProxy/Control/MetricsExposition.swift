import NIOConcurrencyHelpers
import Prometheus

/// One value of a scrape, read from a counter the server already keeps (the name without its
/// namespace, its unit suffix apart so the descriptor joins them the Prometheus way).
struct MetricSample: Equatable, Sendable {
    enum Kind: Equatable, Sendable {
        case counter
        case gauge
    }

    var kind: Kind
    /// `netcond`, or `toxiproxy` for the series the Toxiproxy API names as Toxiproxy does.
    var namespace = "netcond"
    var name: String
    var unit: String
    var help: String
    var labels: [Label] = []
    var value: Double

    struct Label: Equatable, Sendable {
        var name: String
        var value: String
    }

    /// The name as scraped: namespace + `_` + name + `_` + unit.
    var fullName: String { self.descriptor.name }

    var descriptor: MetricNameDescriptor {
        MetricNameDescriptor(namespace: self.namespace, metricName: self.name, unitName: self.unit, helpText: self.help)
    }
}

/// A server's `/metrics`: one Prometheus registry per server, so that several servers in one
/// process (tests start many) each say their own numbers; swift-metrics' global bootstrap could be
/// done once per process only. Both APIs set the registry from the counters they keep at each
/// scrape (``publish(_:)``), so a series is never a second count of what the server counts.
final class MetricsExposition: Sendable {
    let registry = PrometheusCollectorRegistry()
    /// The series the last scrape set, to drop those that are gone (a route the new profile lacks).
    private let published = NIOLockedValueBox<[String: Published]>([:])

    private enum Published {
        case counter(Counter)
        case gauge(Gauge)
    }

    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Sets every sample, removes the series not set this time, and answers the exposition. The
    /// lock is held from the first set to the emit: two scrapes at once cannot mix their values.
    func publish(_ samples: [MetricSample]) -> [UInt8] {
        self.published.withLockedValue { published in
            var now: [String: Published] = [:]
            for sample in samples {
                let labels = sample.labels.map { ($0.name, $0.value) }
                let key = sample.fullName + "{" + labels.map { "\($0.0)=\($0.1)" }.joined(separator: ",") + "}"
                switch sample.kind {
                case .counter:
                    let counter = self.registry.makeCounter(descriptor: sample.descriptor, labels: labels)
                    // The server's own counter is the truth: the Prometheus counter shows it as it is.
                    counter.reset()
                    counter.increment(by: Int64(sample.value))
                    now[key] = .counter(counter)
                case .gauge:
                    let gauge = self.registry.makeGauge(descriptor: sample.descriptor, labels: labels)
                    gauge.set(sample.value)
                    now[key] = .gauge(gauge)
                }
            }
            for (key, series) in published where now[key] == nil {
                switch series {
                case .counter(let counter): self.registry.unregisterCounter(counter)
                case .gauge(let gauge): self.registry.unregisterGauge(gauge)
                }
            }
            published = now
            return self.exposition()
        }
    }

    /// The registry's text, its families in name order (the registry keeps them in a dictionary).
    func exposition() -> [UInt8] {
        var buffer: [UInt8] = []
        self.registry.emit(into: &buffer)
        return Array(Self.ordered(String(decoding: buffer, as: UTF8.self)).utf8)
    }

    /// Families sorted by name, and each family's samples sorted, so that two scrapes of the same
    /// numbers read the same; a family is its `# HELP` and `# TYPE` lines and the samples after them.
    static func ordered(_ text: String) -> String {
        var families: [(name: String, head: [Substring], samples: [Substring])] = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# ") {
                let name = line.split(separator: " ", maxSplits: 3).dropFirst(2).first.map(String.init) ?? ""
                if families.last?.name == name, families.last?.samples.isEmpty == true {
                    families[families.count - 1].head.append(line)
                } else {
                    families.append((name, [line], []))
                }
            } else if !families.isEmpty {
                families[families.count - 1].samples.append(line)
            }
        }
        return families.sorted { $0.name < $1.name }.map { family in
            (family.head + family.samples.sorted()).joined(separator: "\n") + "\n"
        }.joined()
    }
}

extension JSONHTTPResponse {
    /// A Prometheus text exposition (version 0.0.4), as a scraper asks for it.
    static func metrics(_ body: [UInt8]) -> JSONHTTPResponse {
        JSONHTTPResponse(status: 200, body: body, contentType: MetricsExposition.contentType, headers: [])
    }
}
