import NIOCore
import NetcondCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the proxy does above the link, on its event loop: the run's HTTP faults and captive
/// portal, and the event log of what they did. Handlers ask it what a request or a new connection
/// meets; every fault hit, portal answer or interception, portal opening and change of the link's
/// state is recorded with its time since the start, for `GET /events` (and the scenario checks).
final class ProxyRules {
    private(set) var plan: FaultPlan
    /// The profile's routes: a request meets its route's faults (matched by the host it names).
    private(set) var routes: RouteTable
    private(set) var captive: CaptivePortal
    /// The portal's TLS side (`https: wrong-certificate`), started on first use; nil without a
    /// TLS library (such a profile is refused then: ``Profile/tlsRefusal``).
    let portalTLS: PortalTLSServer?
    private(set) var events: [ProxyEvent] = []
    /// Events not kept because the log was full.
    private(set) var eventsDropped = 0
    var startedAt: NIODeadline

    static let maxEvents = 100_000

    init(profile: Profile, seed: UInt64, startedAt: NIODeadline, eventLoop: EventLoop, tls: (any TLSProvider)?) {
        self.plan = FaultPlan(profile: profile, seed: seed)
        self.routes = RouteTable(profile.routes)
        self.captive = CaptivePortal(spec: profile.captivePortal)
        self.portalTLS = tls.map { PortalTLSServer(eventLoop: eventLoop, tls: $0) }
        self.startedAt = startedAt
    }

    /// A profile switch: its faults and portal replace the current ones.
    func switchProfile(to profile: Profile) {
        self.plan.replace(with: profile.faults, routes: profile.routes)
        self.routes = RouteTable(profile.routes)
        self.captive.replace(with: profile.captivePortal)
    }

    // MARK: Captive portal

    /// netcond's own answer to a plain HTTP request (the portal's page or redirect, the portal
    /// site, a connectivity probe), or nil when it goes on to the server.
    func captiveAnswer(method: String, host: String, path: String, now: NIODeadline) -> CannedResponse? {
        let elapsed = self.elapsed(at: now)
        let wasClosed = self.captive.isClosed(at: elapsed)
        guard let answer = self.captive.answer(method: method, host: host, path: path, at: elapsed) else { return nil }
        let url = "http://\(host)\(path)"
        if wasClosed && !self.captive.isClosed(at: elapsed) {
            self.record(
                ProxyEvent(
                    at: elapsed.seconds, kind: .captive, detail: "portal opened: \(method) \(url)", method: method,
                    host: host, path: path, portal: .opened))
        } else if wasClosed && host.lowercased() != CaptivePortal.host {
            self.record(
                ProxyEvent(
                    at: elapsed.seconds, kind: .captive, detail: "portal answered \(answer.status): \(method) \(url)",
                    method: method, host: host, path: path, portal: .answered))
        }
        return answer
    }

    /// What a connection that is not plain HTTP meets while the portal is closed (recorded).
    func captiveIntercepts(host: String, port: Int, now: NIODeadline) -> CaptiveHTTPSBehaviour? {
        let elapsed = self.elapsed(at: now)
        guard let behaviour = self.captive.intercepts(host: host, at: elapsed) else { return nil }
        self.record(
            ProxyEvent(
                at: elapsed.seconds, kind: .captive, detail: "portal \(behaviour.rawValue): \(host):\(port)",
                host: host, portal: .intercepted))
        return behaviour
    }

    /// `closed`, `open`, or nil without a portal.
    func portalState(now: NIODeadline) -> String? {
        guard self.captive.spec != nil else { return nil }
        return self.captive.isClosed(at: self.elapsed(at: now)) ? "closed" : "open"
    }

    /// Opens or closes the portal (live or from a timeline).
    func setPortal(open: Bool, now: NIODeadline) {
        let elapsed = self.elapsed(at: now)
        if open { self.captive.open(at: elapsed) } else { self.captive.close() }
        self.record(
            ProxyEvent(
                at: elapsed.seconds, kind: .captive,
                detail: open ? "portal opened (control)" : "portal closed (control)", portal: open ? .opened : .closed))
    }

    func elapsed(at now: NIODeadline) -> Span {
        Span(nanoseconds: Int64(now.uptimeNanoseconds) - Int64(self.startedAt.uptimeNanoseconds))
    }

    /// The fault that hits this request, if any (recorded).
    func decide(_ request: FaultRequest, now: NIODeadline) -> FaultAction? {
        guard !self.plan.isEmpty else { return nil }
        var request = request
        if !self.routes.isEmpty {
            request.route = self.routes.route(for: RouteTarget(named: request.host, port: request.port ?? 80))
        }
        let elapsed = self.elapsed(at: now)
        guard let hit = self.plan.decide(request, at: elapsed) else { return nil }
        self.record(
            ProxyEvent(
                at: elapsed.seconds,
                kind: .fault,
                detail: "fault \(hit.id) (\(hit.fault.label)): \(request.method) http://\(request.host)\(request.path)",
                fault: hit.id,
                method: request.method,
                host: request.host,
                path: request.path
            )
        )
        return hit.fault.action
    }

    /// Attempts still under way (a blackholed SYN waits a long time): id → host, port, start.
    private var pendingConnects: [Int: (host: String, port: Int, at: NIODeadline)] = [:]
    private var nextConnect = 0

    /// An upstream connection attempt begins; pass the id to ``finishConnect(_:result:)``.
    func beginConnect(to host: String, port: Int, at: NIODeadline) -> Int {
        self.nextConnect += 1
        if self.pendingConnects.count < Self.maxEvents { self.pendingConnects[self.nextConnect] = (host, port, at) }
        return self.nextConnect
    }

    /// How an attempt ended: a failed one is one `connect` event, at the moment it began (an
    /// established one is not logged: a long session would fill the log with them).
    func finishConnect(_ id: Int, result: Result<Void, UpstreamError>) {
        guard let attempt = self.pendingConnects.removeValue(forKey: id), case .failure(let error) = result else {
            return
        }
        let outcome = error.outcome
        let detail = "connect \(attempt.host):\(attempt.port): \(outcome.rawValue) (\(error))"
        self.record(
            ProxyEvent(
                at: self.elapsed(at: attempt.at).seconds, kind: .connect, detail: detail, host: attempt.host,
                port: attempt.port,
                attempt: outcome))
    }

    /// The emulated handshake of an attempt under way got through, `held` past the link's set-up
    /// time: logged (as `held`, at the moment it began) when that is long enough for a client's
    /// connect time-out to have mattered on a network.
    func noteHeldConnect(_ id: Int, held: Span) {
        guard held >= Self.heldWorthNoting, let attempt = self.pendingConnects[id] else { return }
        let detail =
            "connect \(attempt.host):\(attempt.port): made \(held) later than the link's set-up time "
            + "(SYNs unanswered in a blackhole or lost, or a held connect)"
        self.record(
            ProxyEvent(
                at: self.elapsed(at: attempt.at).seconds, kind: .held, detail: detail, host: attempt.host,
                port: attempt.port,
                heldFor: held.seconds))
    }

    /// A response header from `host` held bytes that are not UTF-8: they reach the client as U+FFFD
    /// (NIO's parser hands over text). Logged, and said once per run on stderr, since the client
    /// does not see what the server sent.
    func noteAlteredHeader(_ name: String, host: String, at now: NIODeadline) {
        let detail =
            "a response header from \(host) ('\(name)') held bytes that are not UTF-8: they reached the client as U+FFFD"
        self.record(ProxyEvent(at: self.elapsed(at: now).seconds, kind: .altered, detail: detail, host: host))
        self.sayOnce(.altered, detail + " (bodies and tunnels pass byte for byte)")
    }

    /// A server's response the proxy could not read as HTTP: an event, and a line on stderr the
    /// first time.
    func noteMalformed(_ reason: String, host: String, at now: NIODeadline) {
        let detail =
            "the response of \(host) is not HTTP netcond can read (\(reason)): the client got a 502, or its response cut short"
        self.record(ProxyEvent(at: self.elapsed(at: now).seconds, kind: .malformed, detail: detail, host: host))
        self.sayOnce(.malformed, detail)
    }

    /// Writes `text` on stderr the first time an event of `kind` is said in this run.
    private func sayOnce(_ kind: ProxyEvent.Kind, _ text: String) {
        guard self.said.insert(kind).inserted else { return }
        let line = Array("netcond: \(TerminalText.escaped(text))\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    private var said: Set<ProxyEvent.Kind> = []

    /// The shortest hold worth noting: a SYN's first retransmission time-out (shorter delays,
    /// such as a lost request segment repaired in 200 ms, are within what any connect time-out allows).
    static let heldWorthNoting = Span.seconds(1)

    /// Client connections now open.
    private var openClients: [Int: ClientConnectionRecord] = [:]
    private var nextClient = 0

    /// A client connected to the proxy.
    func beginClient(at: NIODeadline) -> ClientConnectionRecord {
        self.nextClient += 1
        let record = ClientConnectionRecord(id: self.nextClient, acceptedAt: at)
        if self.openClients.count < Self.maxEvents { self.openClients[record.id] = record }
        return record
    }

    /// A client connection closed: recorded when it went unanswered, and when it carried the
    /// origin's bytes (how many reached the client; see ``ClientConnectionRecord``).
    func finishClient(_ record: ClientConnectionRecord, at now: NIODeadline) {
        self.openClients.removeValue(forKey: record.id)
        if record.wentUnanswered { self.record(self.unansweredEvent(record, stillOpen: false)) }
        if let event = self.deliveredEvent(record, at: now, stillOpen: false) { self.record(event) }
    }

    /// How many of the origin's bytes on this client connection reached the client.
    private func deliveredEvent(_ record: ClientConnectionRecord, at now: NIODeadline, stillOpen: Bool) -> ProxyEvent? {
        guard let origin = record.originUpstream, let delivered = record.deliveredFromOrigin else { return nil }
        let how = record.cut.map { "; the link \($0.pastTense) it" } ?? ""
        var event = ProxyEvent(
            at: self.elapsed(at: now).seconds, kind: .delivered,
            detail:
                "client connection \(record.id): \(delivered) bytes of the origin's connection from port \(origin.localPort) "
                + "reached the client\(how)\(stillOpen ? " (still open)" : "")",
            cut: record.cut, localPort: origin.localPort, bytes: delivered,
            connectedAt: self.elapsed(at: origin.connectedAt).seconds,
            clientFINAt: record.clientFINAt.map { self.elapsed(at: $0).seconds })
        event.deliveries = record.deliverySamples.map {
            ProxyEvent.DeliverySample(at: self.elapsed(at: $0.at).seconds, bytes: $0.bytes)
        }
        event.stillOpen = stillOpen
        return event
    }

    private func unansweredEvent(_ record: ClientConnectionRecord, stillOpen: Bool) -> ProxyEvent {
        ProxyEvent(
            at: self.elapsed(at: record.acceptedAt).seconds, kind: .client,
            detail: "client connection \(record.id): \(record.bytesFromClient) bytes sent, no server reached, no answer"
                + (stillOpen ? " (still open)" : ""),
            attempt: .noAnswer)
    }

    /// The log, with what is still under way (connection attempts, client connections nothing has
    /// answered yet) as events whose outcome is `unanswered`, in time order.
    var eventsWithPending: [ProxyEvent] {
        let pending = self.pendingConnects.values.map { attempt in
            ProxyEvent(
                at: self.elapsed(at: attempt.at).seconds, kind: .connect,
                detail: "connect \(attempt.host):\(attempt.port): no answer yet", host: attempt.host,
                port: attempt.port,
                attempt: .unanswered)
        }
        let silent = self.openClients.values.filter(\.wentUnanswered).map { self.unansweredEvent($0, stillOpen: true) }
        // What reached the client so far on a connection still open (a client killed at its
        // deadline while the link still held the rest): the evidence counts the rest as not
        // received, as it never was.
        let delivering = self.openClients.values.compactMap { self.deliveredEvent($0, at: .now(), stillOpen: true) }
        return (self.events + pending + silent + delivering).sorted { $0.at < $1.at }
    }

    func add(_ fault: HTTPFault) -> Int { self.plan.add(fault) }
    func remove(id: Int) -> Bool { self.plan.remove(id: id) }
    func remove(named name: String) { self.plan.remove(named: name) }
    func removeAll() { self.plan.removeAll() }

    func record(_ event: ProxyEvent) {
        guard self.events.count < Self.maxEvents else {
            self.eventsDropped += 1
            return
        }
        self.events.append(event)
    }
}

/// One line of a run's event log: typed values for the decisions (the scenario checks read
/// `kind`, `attempt`, `cut` and `portal`, never `detail`), and a line of text for people.
public struct ProxyEvent: Codable, Equatable, Sendable {
    public enum Kind: String, Codable, Sendable {
        /// A fault hit a request.
        case fault
        /// The portal answered, intercepted, opened or closed.
        case captive
        /// The link's state changed.
        case link
        /// An upstream connection attempt that failed, at the moment it began, with its outcome.
        case connect
        /// A client connection that sent a request no server ever saw and got no answer
        /// (swallowed by a blackhole).
        case client
        /// A client connection to netcond's origin ended: how many of the origin's bytes reached it.
        case delivered
        /// netcond passed on bytes it could not pass unchanged (a server's response header that is
        /// not UTF-8 reaches the client with U+FFFD in its place): the run is not exact there.
        case altered
        /// A server's response that was not HTTP the proxy could read (with `host`).
        case malformed
        /// An upstream connection that was made, but held past the link's set-up time (SYNs
        /// swallowed by a blackhole or lost, a `connect_hold`), at the moment it began, with
        /// `held_for`: a connect time-out shorter than that would have fired on a network.
        case held
    }

    /// Seconds since the run started.
    public var at: Double
    public var kind: Kind
    /// For people; no decision reads it.
    public var detail: String
    public var fault: Int?
    public var method: String?
    public var host: String?
    public var path: String?
    public var port: Int?
    /// For `connect` and `client`: how the attempt ended.
    public var attempt: AttemptOutcome?
    /// For `delivered`: how the link cut the connection, if it did.
    public var cut: CutMode?
    /// For `captive`: what the portal did.
    public var portal: PortalAction?
    /// For `delivered`: the local port of the proxy's connection to the origin (the origin's peer port).
    public var localPort: Int?
    /// For `delivered`: the bytes of that connection that reached the client's socket.
    public var bytes: Int64?
    /// For `delivered`: when that connection to the origin was established (seconds since the start).
    public var connectedAt: Double?
    /// For `held`: how long past the link's set-up time the connection was made (seconds).
    public var heldFor: Double?
    /// For `delivered`: when the client's FIN reached netcond (seconds since the start), if it did
    /// before the connection ended: requests the origin got after it were already on the link.
    public var clientFINAt: Double?
    /// For `delivered`: when the origin's bytes reached the client's socket (seconds since the
    /// start, bytes so far), for when each response's last byte arrived. In the run's evidence
    /// only: not in the JSON (`/events`).
    public var deliveries: [DeliverySample] = []
    /// For `delivered`: the connection was still open when the log was read (the run ended with
    /// bytes still on their way). In the run's evidence only, as ``deliveries``.
    public var stillOpen = false

    /// The origin's bytes of a connection that had reached the client by a moment.
    public struct DeliverySample: Equatable, Sendable {
        public var at: Double
        public var bytes: Int64

        public init(at: Double, bytes: Int64) {
            self.at = at
            self.bytes = bytes
        }
    }

    /// The JSON keeps one `outcome` text: the attempt's outcome, or the cut's mode.
    enum CodingKeys: String, CodingKey {
        case at, kind, detail, fault, method, host, path, port, outcome, bytes, portal
        case localPort = "local_port"
        case connectedAt = "connected_at"
        case heldFor = "held_for"
        case clientFINAt = "client_fin_at"
    }

    public init(
        at: Double, kind: Kind, detail: String, fault: Int? = nil, method: String? = nil, host: String? = nil,
        path: String? = nil, port: Int? = nil, attempt: AttemptOutcome? = nil, cut: CutMode? = nil,
        portal: PortalAction? = nil, localPort: Int? = nil, bytes: Int64? = nil, connectedAt: Double? = nil,
        heldFor: Double? = nil, clientFINAt: Double? = nil
    ) {
        self.at = at
        self.kind = kind
        self.detail = detail
        self.fault = fault
        self.method = method
        self.host = host
        self.path = path
        self.port = port
        self.attempt = attempt
        self.cut = cut
        self.portal = portal
        self.localPort = localPort
        self.bytes = bytes
        self.connectedAt = connectedAt
        self.heldFor = heldFor
        self.clientFINAt = clientFINAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.at = try c.decode(Double.self, forKey: .at)
        self.kind = try c.decode(Kind.self, forKey: .kind)
        self.detail = try c.decode(String.self, forKey: .detail)
        self.fault = try c.decodeIfPresent(Int.self, forKey: .fault)
        self.method = try c.decodeIfPresent(String.self, forKey: .method)
        self.host = try c.decodeIfPresent(String.self, forKey: .host)
        self.path = try c.decodeIfPresent(String.self, forKey: .path)
        self.port = try c.decodeIfPresent(Int.self, forKey: .port)
        let outcome = try c.decodeIfPresent(String.self, forKey: .outcome)
        self.attempt = self.kind == .delivered ? nil : outcome.flatMap(AttemptOutcome.init(rawValue:))
        self.cut = self.kind == .delivered ? outcome.flatMap(CutMode.init(rawValue:)) : nil
        self.portal = try c.decodeIfPresent(PortalAction.self, forKey: .portal)
        self.localPort = try c.decodeIfPresent(Int.self, forKey: .localPort)
        self.bytes = try c.decodeIfPresent(Int64.self, forKey: .bytes)
        self.connectedAt = try c.decodeIfPresent(Double.self, forKey: .connectedAt)
        self.heldFor = try c.decodeIfPresent(Double.self, forKey: .heldFor)
        self.clientFINAt = try c.decodeIfPresent(Double.self, forKey: .clientFINAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(self.at, forKey: .at)
        try c.encode(self.kind, forKey: .kind)
        try c.encode(self.detail, forKey: .detail)
        try c.encodeIfPresent(self.fault, forKey: .fault)
        try c.encodeIfPresent(self.method, forKey: .method)
        try c.encodeIfPresent(self.host, forKey: .host)
        try c.encodeIfPresent(self.path, forKey: .path)
        try c.encodeIfPresent(self.port, forKey: .port)
        try c.encodeIfPresent(self.attempt?.rawValue ?? self.cut?.rawValue, forKey: .outcome)
        try c.encodeIfPresent(self.portal, forKey: .portal)
        try c.encodeIfPresent(self.localPort, forKey: .localPort)
        try c.encodeIfPresent(self.bytes, forKey: .bytes)
        try c.encodeIfPresent(self.connectedAt, forKey: .connectedAt)
        try c.encodeIfPresent(self.heldFor, forKey: .heldFor)
        try c.encodeIfPresent(self.clientFINAt, forKey: .clientFINAt)
    }
}
