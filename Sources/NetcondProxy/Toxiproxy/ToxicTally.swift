import NIOConcurrencyHelpers

/// The bytes one Toxiproxy proxy received and sent, each stream, since it opened: what its
/// `/metrics` says as Toxiproxy's `toxiproxy_proxy_received_bytes_total` and
/// `toxiproxy_proxy_sent_bytes_total`. Received is what a side read (the client's bytes for
/// `upstream`, the server's for `downstream`); sent is what the toxics let through and the proxy
/// wrote on, so a toxic that holds or drops bytes shows as the gap between the two. Its
/// connections count on their loop; a scrape reads the totals from another thread.
final class ToxicTally: Sendable {
    struct Totals: Equatable, Sendable {
        var receivedUpstream: Int64 = 0
        var sentUpstream: Int64 = 0
        var receivedDownstream: Int64 = 0
        var sentDownstream: Int64 = 0
    }

    private let totals = NIOLockedValueBox(Totals())

    var now: Totals { self.totals.withLockedValue { $0 } }

    func received(_ stream: Toxic.Stream, _ bytes: Int) {
        self.totals.withLockedValue { totals in
            switch stream {
            case .upstream: totals.receivedUpstream += Int64(bytes)
            case .downstream: totals.receivedDownstream += Int64(bytes)
            }
        }
    }

    func sent(_ stream: Toxic.Stream, _ bytes: Int) {
        self.totals.withLockedValue { totals in
            switch stream {
            case .upstream: totals.sentUpstream += Int64(bytes)
            case .downstream: totals.sentDownstream += Int64(bytes)
            }
        }
    }

    /// The four series of one proxy, labelled as Toxiproxy labels them.
    func samples(proxy: String, listener: String, upstream: String) -> [MetricSample] {
        let totals = self.now
        func sample(_ name: String, _ help: String, _ direction: String, _ value: Int64) -> MetricSample {
            MetricSample(
                kind: .counter, namespace: "toxiproxy", name: name, unit: "total", help: help,
                labels: [
                    .init(name: "direction", value: direction), .init(name: "listener", value: listener),
                    .init(name: "proxy", value: proxy), .init(name: "upstream", value: upstream),
                ], value: Double(value))
        }
        let received = "Bytes a proxy read, each stream: upstream from the client, downstream from the server."
        let sent =
            "Bytes a proxy wrote on after its toxics, each stream: upstream to the server, downstream to the client."
        return [
            sample("proxy_received_bytes", received, "downstream", totals.receivedDownstream),
            sample("proxy_received_bytes", received, "upstream", totals.receivedUpstream),
            sample("proxy_sent_bytes", sent, "downstream", totals.sentDownstream),
            sample("proxy_sent_bytes", sent, "upstream", totals.sentUpstream),
        ]
    }
}
