import NetcondCore
import NetcondOrigin

/// What the client really received of the origin's responses.
///
/// The origin counts a body byte as sent when its socket accepts it. When a connection ends early
/// (the link cuts it, the client gives up), what was still in the loopback socket buffers or on
/// the emulated link never reaches the client: megabytes, on a fast loopback. The proxy notes, for
/// each client connection that went to the origin, how many of that origin connection's bytes it
/// delivered to the client's socket (a `delivered` event, keyed by the local port the origin sees
/// as its peer); the origin notes how many bytes each connection's socket accepted. The difference
/// is what the client never got, and it belongs to the last response on that connection.
///
/// Behind TLS both counts are ciphertext: the loss is overstated by the record overhead of the
/// lost part (about 22–29 bytes per 16 KB record), which ``Undelivered/uncertainty`` bounds; a loss
/// within that bound (a `close_notify` written as the connection went) is no loss. Over plain HTTP
/// the proxy re-encodes what it decodes byte for byte (interim `100 Continue` responses included).
public enum DeliveryEvidence {
    /// One `delivered` event of the proxy.
    public struct Delivery: Sendable, Equatable {
        /// When the proxy's connection to the origin was established, on the origin's clock (ports
        /// are reused: the origin connection is the latest from that port opened by then, give or
        /// take ``acceptSlack``).
        public var at: Instant
        /// The local port of the proxy's connection to the origin.
        public var localPort: Int
        /// Bytes of that connection that reached the client's socket.
        public var bytes: Int64
        /// How the link cut the connection, if it did.
        public var cut: CutMode?
        /// When the client's FIN reached netcond, on the origin's clock, if it did.
        public var clientFIN: Instant?
        /// The connection was still open when the run ended: what had not arrived was stopped by
        /// the run's end (a client killed at its deadline), not by the network.
        public var stillOpen = false
        /// When the connection's bytes reached the client's socket (moment, bytes so far), in order.
        public var samples: [Sample] = []

        /// The connection's bytes that had reached the client's socket by a moment.
        public struct Sample: Sendable, Equatable {
            public var at: Instant
            public var bytes: Int64

            public init(at: Instant, bytes: Int64) {
                self.at = at
                self.bytes = bytes
            }
        }

        public init(at: Instant, localPort: Int, bytes: Int64, cut: CutMode? = nil, clientFIN: Instant? = nil) {
            self.at = at
            self.localPort = localPort
            self.bytes = bytes
            self.cut = cut
            self.clientFIN = clientFIN
        }
    }

    /// Body bytes of one response that never reached the client.
    public struct Undelivered: Sendable, Equatable {
        public var bytes: Int64
        public var uncertainty: Int64
        public var cut: CutMode?
        /// Lost because the run ended with the connection open, not because of the network.
        public var byRunEnd = false
    }

    /// The origin notes a connection when its own event loop accepts it, which can come a moment
    /// after the proxy's side saw the connect complete.
    static let acceptSlack = Span.seconds(Int64(1))

    /// Per request-log entry id: when the last byte of its (whole) response reached the client's
    /// socket. Absent for a response cut short, one whose end is not known, or one the samples
    /// do not reach.
    public static func received(
        entries: [OriginRequestLog.Entry],
        connections: [OriginRequestLog.Connection],
        deliveries: [Delivery]
    ) -> [Int: Instant] {
        var byConnection: [Int: Delivery] = [:]
        for delivery in deliveries where !delivery.samples.isEmpty {
            if let connection = Self.connection(of: delivery, in: connections) {
                byConnection[connection.id] = delivery
            }
        }
        var result: [Int: Instant] = [:]
        for entry in entries {
            guard let end = entry.connectionBytesAtEnd, let samples = byConnection[entry.connection]?.samples else {
                continue
            }
            // The first sample that carries the response's last byte (samples grow in bytes).
            var low = 0, high = samples.count
            while low < high {
                let middle = (low + high) / 2
                if samples[middle].bytes >= end { high = middle } else { low = middle + 1 }
            }
            if low < samples.count { result[entry.id] = samples[low].at }
        }
        return result
    }

    /// Per request-log entry id: what of its body never reached the client (entries that reached
    /// it whole are absent).
    /// The origin's connection a delivery counted: the latest from its port opened by then (ports
    /// are reused).
    static func connection(
        of delivery: Delivery, in connections: [OriginRequestLog.Connection]
    ) -> OriginRequestLog.Connection? {
        connections.last { $0.peerPort == delivery.localPort && $0.openedAt <= delivery.at + Self.acceptSlack }
    }

    /// Per request-log entry id: how long after its client's FIN the request reached the origin,
    /// for requests that did (they were already on the emulated link when the client closed or
    /// shut down its side; a network delivers those too).
    public static func afterClientFIN(
        entries: [OriginRequestLog.Entry],
        connections: [OriginRequestLog.Connection],
        deliveries: [Delivery]
    ) -> [Int: Span] {
        var result: [Int: Span] = [:]
        for delivery in deliveries {
            guard let fin = delivery.clientFIN, let connection = Self.connection(of: delivery, in: connections) else {
                continue
            }
            for entry in entries where entry.connection == connection.id && entry.timestamp > fin {
                result[entry.id] = entry.timestamp - fin
            }
        }
        return result
    }

    public static func undelivered(
        entries: [OriginRequestLog.Entry],
        connections: [OriginRequestLog.Connection],
        deliveries: [Delivery]
    ) -> [Int: Undelivered] {
        var result: [Int: Undelivered] = [:]
        let lastEntry = Dictionary(entries.map { ($0.connection, $0) }, uniquingKeysWith: { $0.id > $1.id ? $0 : $1 })
        for delivery in deliveries {
            guard let connection = Self.connection(of: delivery, in: connections), let entry = lastEntry[connection.id]
            else { continue }
            let lost = connection.bytesWritten - delivery.bytes
            let uncertainty = connection.tls ? 64 + max(0, lost) / 512 : 0
            guard lost > uncertainty else {
                // Everything the origin wrote arrived; a response it had not finished was still cut by the link.
                if let cut = delivery.cut, !entry.completed {
                    result[entry.id] = Undelivered(bytes: 0, uncertainty: 0, cut: cut)
                }
                continue
            }
            result[entry.id] = Undelivered(
                bytes: min(lost, entry.bodyBytesSent), uncertainty: uncertainty, cut: delivery.cut,
                byRunEnd: delivery.stillOpen)
        }
        return result
    }
}
