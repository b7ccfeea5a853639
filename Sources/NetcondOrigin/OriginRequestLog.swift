import NIOHTTP1
import NetcondCore

/// Every request the origin saw, in arrival order, with what it answered: the evidence the scenario checks read
/// ("resumes" looks at `Range` and body bytes sent, "idempotent" at `Idempotency-Key`, "backs off" at timestamps).
///
/// Thread-safe: connections on any event loop append and update entries; readers take snapshots.
/// An entry is added when a request head arrives and updated as its response goes out; `isFinished` becomes true when
/// the response ended (`completed`) or the connection went away first (not `completed`).
public final class OriginRequestLog: Sendable {
    /// The request headers the checks care about, copied verbatim (first value of each).
    public struct Headers: Hashable, Sendable {
        public var range: String?
        public var ifNoneMatch: String?
        public var ifRange: String?
        public var idempotencyKey: String?
        public var ifModifiedSince: String? = nil

        public init(
            range: String? = nil, ifNoneMatch: String? = nil, ifRange: String? = nil,
            idempotencyKey: String? = nil, ifModifiedSince: String? = nil
        ) {
            self.range = range
            self.ifNoneMatch = ifNoneMatch
            self.ifRange = ifRange
            self.idempotencyKey = idempotencyKey
            self.ifModifiedSince = ifModifiedSince
        }

        /// A conditional GET: it names the copy the client has (`If-None-Match` or
        /// `If-Modified-Since`), so the origin may answer 304.
        public var isConditional: Bool {
            self.ifNoneMatch != nil || self.ifModifiedSince != nil
        }

        public init(_ headers: HTTPHeaders) {
            self.range = headers.first(name: "range")
            self.ifNoneMatch = headers.first(name: "if-none-match")
            self.ifRange = headers.first(name: "if-range")
            self.idempotencyKey = headers.first(name: "idempotency-key")
            self.ifModifiedSince = headers.first(name: "if-modified-since")
        }
    }

    /// One request and its response.
    public struct Entry: Hashable, Sendable {
        /// Position in arrival order, from 0.
        public var id: Int
        /// Which connection it came on (numbered from 0 per server), to tell keep-alive from new connections.
        public var connection: Int
        /// When the request head arrived (from the injected clock).
        public var timestamp: Instant
        public var method: String
        /// The request target exactly as sent (`/bytes/1MB?seed=3`).
        public var target: String
        /// The host the request asked for (`cdn.netcond.test`: an absolute-form target's, else
        /// `Host:`), lower case, without the port; nil when it named none. Every name under
        /// `netcond.test` reaches this origin, so this tells them apart.
        public var host: String? = nil
        public var headers: Headers
        /// Status code of the response head, or `nil` if none was sent.
        public var status: Int?
        /// When the response head was written (from the injected clock): before it, the request
        /// waited on the server (a `delay` fault, a slow endpoint).
        public var respondedAt: Instant? = nil
        /// The response's `Retry-After`, as sent.
        public var retryAfter: String?
        /// Body bytes the socket accepted for this response (a HEAD response sends none).
        public var bodyBytesSent: Int64
        /// The whole response, end included, was written.
        public var completed: Bool
        /// The response ended or the connection closed; nothing more will change.
        public var isFinished: Bool
        /// When it finished (from the injected clock).
        public var finishedAt: Instant?
        /// The connection's ``Connection/bytesWritten`` once the last byte of this response was
        /// written: where the response ends in the connection's byte stream (for when it reached
        /// the client). Nil for a response cut short.
        public var connectionBytesAtEnd: Int64?
        /// A POST's side effect (set when the origin did the work, answered or not).
        public var effect: OriginEffect?
        /// The origin fault that acted on it (a cut only when the body was longer), when one did.
        public var fault: FaultAction?

        /// The target's path, without query, as the router reads it (`/files/big.bin` also for the absolute form).
        public var path: String {
            let segments = OriginRequest(method: .init(rawValue: self.method), target: self.target).segments ?? []
            return "/" + segments.joined(separator: "/")
        }
    }

    /// One connection to the origin: the evidence that ties a request to what the proxy saw of it.
    public struct Connection: Hashable, Sendable {
        /// The number entries carry in ``Entry/connection``.
        public var id: Int
        /// The peer's port (the proxy's local port for its connection here), nil if unknown.
        public var peerPort: Int?
        /// Behind TLS: ``bytesWritten`` counts ciphertext.
        public var tls: Bool
        public var openedAt: Instant
        /// Bytes the socket accepted on this connection, all responses and (behind TLS) the
        /// handshake and record overhead included.
        public var bytesWritten: Int64
        /// Finished responses whose end in the byte stream is not set yet: the count of their last
        /// write comes just after they finish (see ``OriginRequestLog/addBytesWritten(_:connection:)``).
        var endsPending: [Int] = []
    }

    private let box = LockedBox<[Entry]>([])
    private let connectionBox = LockedBox<[Int: Connection]>([:])

    public init() {}

    /// Every connection so far, in the order they were accepted (their ids).
    public var connections: [Connection] {
        self.connectionBox.withLock { $0.values.sorted { $0.id < $1.id } }
    }

    func openConnection(id: Int, peerPort: Int?, tls: Bool, at instant: Instant) {
        self.connectionBox.withLock {
            $0[id] = Connection(id: id, peerPort: peerPort, tls: tls, openedAt: instant, bytesWritten: 0)
        }
    }

    func addBytesWritten(_ count: Int, connection id: Int) {
        // Every response finished since the last count ends here (behind TLS one ciphertext
        // write can carry the ends of several pipelined responses).
        let ended = self.connectionBox.withLock { connections -> (entries: [Int], at: Int64)? in
            guard connections[id] != nil else { return nil }
            connections[id]!.bytesWritten += Int64(count)
            guard !connections[id]!.endsPending.isEmpty else { return nil }
            defer { connections[id]!.endsPending.removeAll() }
            return (connections[id]!.endsPending, connections[id]!.bytesWritten)
        }
        if let ended {
            self.box.withLock { entries in
                for entry in ended.entries where entries.indices.contains(entry) {
                    entries[entry].connectionBytesAtEnd = ended.at
                }
            }
        }
    }

    /// A snapshot of all entries, in arrival order.
    public var entries: [Entry] {
        self.box.withLock { $0 }
    }

    public var count: Int {
        self.box.withLock { $0.count }
    }

    /// Adds an entry for a request whose head just arrived; returns its id.
    func begin(
        connection: Int, timestamp: Instant, method: String, target: String, host: String? = nil, headers: Headers
    ) -> Int {
        self.box.withLock { entries in
            let id = entries.count
            entries.append(
                Entry(
                    id: id, connection: connection, timestamp: timestamp, method: method,
                    target: target, host: host, headers: headers, status: nil, respondedAt: nil, retryAfter: nil,
                    bodyBytesSent: 0,
                    completed: false, isFinished: false, finishedAt: nil, connectionBytesAtEnd: nil, effect: nil))
            return id
        }
    }

    func recordStatus(_ status: Int, retryAfter: String? = nil, id: Int, at instant: Instant? = nil) {
        self.box.withLock { entries in
            guard entries.indices.contains(id), !entries[id].isFinished else { return }
            entries[id].status = status
            entries[id].retryAfter = retryAfter
            entries[id].respondedAt = instant
        }
    }

    func recordFault(_ fault: FaultAction, id: Int) {
        self.box.withLock { entries in
            guard entries.indices.contains(id) else { return }
            entries[id].fault = fault
        }
    }

    func recordEffect(_ effect: OriginEffect, id: Int) {
        self.box.withLock { entries in
            guard entries.indices.contains(id) else { return }
            entries[id].effect = effect
        }
    }

    func addBodyBytes(_ count: Int, id: Int) {
        self.box.withLock { entries in
            guard entries.indices.contains(id), !entries[id].isFinished else { return }
            entries[id].bodyBytesSent += Int64(count)
        }
    }

    /// Marks the entry finished; only the first call counts.
    func finish(id: Int, completed: Bool, at instant: Instant) {
        let connection = self.box.withLock { entries -> Int? in
            guard entries.indices.contains(id), !entries[id].isFinished else { return nil }
            entries[id].completed = completed
            entries[id].isFinished = true
            entries[id].finishedAt = instant
            return completed ? entries[id].connection : nil
        }
        // A whole response: the count of its last write, which comes next, marks where it ends.
        if let connection { self.connectionBox.withLock { $0[connection]?.endsPending.append(id) } }
    }
}
