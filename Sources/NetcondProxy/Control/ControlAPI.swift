import Foundation
import NetcondCore

/// The live control API, as a pure function from a request to what to do: `netcond ctl` and any
/// program under `netcond run` (at `NETCOND_CONTROL`) use it to read the link's state and change
/// conditions while a run goes on.
///
/// | method + path        | body                                     | does                                   |
/// | -------------------- | ---------------------------------------- | -------------------------------------- |
/// | `GET /`              |                                          | the live dashboard (an HTML page)      |
/// | `GET /status`        |                                          | state and counters                     |
/// | `GET /history[?since=T]` |                                      | the last 10 minutes, sampled (the dashboard's graphs) |
/// | `POST /profile`      | `{"name": "3g"}` or `{"yaml": "…"}`       | switch profile (its schedule restarts) |
/// | `POST /outage`       | `{"behaviour": "blackhole"}`             | start an outage (blackhole/refuse/reset) |
/// | `DELETE /outage`     |                                          | end the live outage                    |
/// | `POST /stall`        | `{"direction": "down"}`                  | stall up, down or both                 |
/// | `DELETE /stall`      |                                          | end the live stall                     |
/// | `GET /faults`        |                                          | the faults in force, with their counts |
/// | `POST /faults`       | a fault, e.g. `{"status": 503, "first": 3}` | add a fault (after the others)      |
/// | `DELETE /faults/ID`  |                                          | remove one fault, or every fault of that name (`DELETE /faults`: all) |
/// | `GET /events`        |                                          | the run's event log (faults hit, link changes) |
/// | `POST /captive`      | `{"open": true}`                         | open (log in) or close the captive portal |
/// | `POST /cut`          | none, or `{"mode": "close"}`             | cut every open connection once (reset, or close) |
/// | `GET /metrics`       |                                          | the counters in Prometheus's text format (``ControlMetrics``) |
///
/// Every answer is JSON: the status after the change, or `{"error": "…"}` with 400 (bad body),
/// 404 (unknown path), 405 (wrong method) or 413 (body too large); a rejected request changes nothing.
/// A profile's `yaml` must be self-contained: `extends:` and `use:` may name built-ins only (the API
/// reads no file). Before routing, `ControlAccess` refuses what a web page could send: 403 for its
/// `Host` or `Origin`, 415 for a POST or a body that is not `application/json`.
public enum ControlAPI {
    public static let maxBodyBytes = 1 << 20
    static let tooLarge = Rejection(status: 413, message: "the body is over 1 MB")

    public enum Route: Equatable, Sendable {
        /// `GET /`: the live dashboard (a page, served by the control server itself).
        case dashboard
        case status
        /// `GET /history[?since=T]`: the samples and marks after T seconds (the control server
        /// keeps them itself).
        case history(since: Double?)
        case faults
        case events
        /// `GET /routes`: the routes beyond the access link, each with its link now.
        case routes
        case command(ControlCommand)
    }

    public struct Rejection: Error, Equatable, Sendable {
        public var status: Int
        public var message: String
    }

    static let paths = [
        "/status", "/history", "/profile", "/outage", "/stall", "/faults", "/events", "/captive", "/cut",
        "/handover", "/routes", "/metrics", "/ (the dashboard)",
    ]

    /// What a request asks for. `target` may be origin-form (`/status`) or absolute-form
    /// (`http://127.0.0.1:8081/status`).
    public static func route(method: String, target: String, body: [UInt8]) -> Result<Route, Rejection> {
        let path = Self.path(of: target)
        guard body.count <= Self.maxBodyBytes else { return .failure(Self.tooLarge) }
        let wrongMethod = { (allowed: String) in Self.wrongMethod(method, path, allowed: allowed) }
        switch path {
        case "/", "/dashboard":
            return method == "GET" ? .success(.dashboard) : wrongMethod("GET")
        case "/status":
            return method == "GET" ? .success(.status) : wrongMethod("GET")
        case "/history":
            guard method == "GET" else { return wrongMethod("GET") }
            return Self.since(in: target).map { .history(since: $0) }
        case "/profile":
            guard method == "POST" else { return wrongMethod("POST") }
            return Self.object(body, example: #"{"name": "3g"} or {"yaml": "extends: 3g\n…"}"#).flatMap(Self.profile)
        case "/outage":
            return Self.outage(method: method, body: body) ?? wrongMethod("POST or DELETE")
        case "/stall":
            return Self.stall(method: method, body: body) ?? wrongMethod("POST or DELETE")
        case "/events":
            return method == "GET" ? .success(.events) : wrongMethod("GET")
        case "/captive":
            guard method == "POST" else { return wrongMethod("POST") }
            return Self.captive(body)
        case "/cut":
            guard method == "POST" else { return wrongMethod("POST") }
            return Self.cut(body)
        case "/handover":
            guard method == "POST" else { return wrongMethod("POST") }
            return Self.handover(body)
        case "/faults":
            return Self.faults(method: method, body: body) ?? wrongMethod("GET, POST or DELETE")
        default:
            if let destinations = Self.destinations(method: method, path: path, body: body) { return destinations }
            if path.hasPrefix("/faults/") {
                guard method == "DELETE" else { return wrongMethod("DELETE") }
                return Self.removeFault(path)
            }
            return .failure(
                Rejection(
                    status: 404, message: "no such endpoint \(path); endpoints: \(Self.paths.joined(separator: ", "))")
            )
        }
    }

    /// `since=T` of a target's query (seconds since the run started), nil without it.
    static func since(in target: String) -> Result<Double?, Rejection> {
        guard let query = target.firstIndex(of: "?") else { return .success(nil) }
        for pair in target[target.index(after: query)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.first == "since" else {
                return .failure(Rejection(status: 400, message: "unknown query '\(pair)'; allowed: since=SECONDS"))
            }
            guard parts.count == 2, let value = Double(parts[1]), value.isFinite else {
                return .failure(
                    Rejection(
                        status: 400,
                        message: "since must be a number of seconds, got '\(parts.count == 2 ? parts[1] : "")'"))
            }
            return .success(value)
        }
        return .success(nil)
    }

    static func path(of target: String) -> String {
        var rest = Substring(target)
        if let scheme = rest.range(of: "://") {
            rest = rest[scheme.upperBound...]
            rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        if let query = rest.firstIndex(of: "?") { rest = rest[..<query] }
        return String(rest)
    }

    /// A JSON object (one key once each), or why not with `example` of what is expected.
    package static func object(_ body: [UInt8], example: String) -> Result<[String: Any], Rejection> {
        let bad = Rejection(status: 400, message: "expected a JSON object like \(example)")
        guard !body.isEmpty,
            let parsed = try? JSONSerialization.jsonObject(with: Data(body)),
            let object = parsed as? [String: Any]
        else { return .failure(bad) }
        if let key = JSONDuplicateKeys.first(in: body) {
            return .failure(Rejection(status: 400, message: "the key '\(key)' is given twice; allowed: each key once"))
        }
        return .success(object)
    }

    static func word(_ value: Any?, key: String, among allowed: [String]) -> Result<String, Rejection> {
        guard let text = value as? String else {
            return .failure(
                Rejection(
                    status: 400,
                    message: "'\(key)' is missing or not a string; allowed: \(allowed.joined(separator: ", "))"))
        }
        guard allowed.contains(text) else {
            return .failure(
                Rejection(status: 400, message: "unknown \(key) '\(text)'; allowed: \(allowed.joined(separator: ", "))")
            )
        }
        return .success(text)
    }

    /// Why a path is refused wherever a profile sent to the API names one (`name`, `extends:`, a
    /// phase's `use:`): the API reads no file, whatever the process running it may read.
    static let pathsRefused =
        "paths are not accepted over the control API (it reads no file); allowed: a built-in "
        + "profile name (netcond profiles lists them) or none; `netcond ctl profile FILE` resolves files on its own "
        + "side and sends the profile whole"

    static func profile(_ object: [String: Any]) -> Result<Route, Rejection> {
        let keys = Set(object.keys)
        let allowed: Set<String> = ["name", "yaml", "file"]
        if !keys.isSubset(of: allowed) || (keys.contains("name") && keys != ["name"]) {
            let extra = keys.subtracting(allowed).sorted().map { "'\($0)'" }.joined(separator: ", ")
            return .failure(
                Rejection(
                    status: 400,
                    message: (extra.isEmpty ? "'name' goes alone" : "unknown key \(extra)")
                        + #"; allowed: {"name": "3g"} (a built-in) or {"yaml": "…", "file": "mine.yaml"} (a profile's text), not both"#
                ))
        }
        if let name = object["name"] as? String {
            do {
                guard !ProfileCatalog.looksLikePath(name) else {
                    return .failure(Rejection(status: 400, message: "'\(name)' is a path; \(Self.pathsRefused)"))
                }
                return .success(.command(.switchProfile(try ProfileCatalog.resolve(name))))
            } catch {
                return .failure(Rejection(status: 400, message: "\(error)"))
            }
        }
        if let yaml = object["yaml"] as? String {
            do {
                let name = (object["file"] as? String) ?? "profile.yaml"
                let decoder = ProfileDecoder(fileReferences: .refused(reason: Self.pathsRefused))
                return .success(.command(.switchProfile(try decoder.decode(yaml: yaml, file: name))))
            } catch {
                return .failure(Rejection(status: 400, message: "\(error)"))
            }
        }
        return .failure(
            Rejection(
                status: 400, message: #"expected {"name": "3g"} (a built-in) or {"yaml": "…"} (a profile's text)"#))
    }
}

/// A change to a running link.
public enum ControlCommand: Equatable, Sendable {
    case switchProfile(Profile)
    /// Start an outage, or end the live one (nil).
    case outage(OutageBehaviour?)
    /// Stall a direction, or end the live stall (nil).
    case stall(StallDirection?)
    /// Add an HTTP fault after the others.
    case addFault(HTTPFault)
    /// Remove one fault by id, or all (nil).
    case removeFault(Int?)
    /// Remove every fault with this name (the fault entry's `name:`).
    case removeFaultsNamed(String)
    /// Open (log in) or close the captive portal.
    case captive(open: Bool)
    /// Cut every connection open now (the link stays up).
    case cut(CutMode)
    /// Change one route (by name) beyond the access link.
    case route(String, RouteChange)
    /// The device leaves its network for the profile's: every connection open now is stranded
    /// (nothing of it carried again, no reset), nothing is carried for `gap`, then the profile's link.
    case handover(Profile, gap: Span)
}

/// One fault in force, as `GET /faults` lists it.
public struct ControlFault: Codable, Equatable, Sendable {
    public var id: Int
    public var label: String
    /// The fault in the profile schema (YAML flow style): what `POST /faults` takes.
    public var fault: String
    public var matched: Int
    public var applied: Int
}

/// `GET /faults`; `added` is the id `POST /faults` gave.
public struct ControlFaults: Codable, Equatable, Sendable {
    public var faults: [ControlFault]
    public var added: Int?
}

/// `GET /events`.
public struct ControlEvents: Codable, Equatable, Sendable {
    public var events: [ProxyEvent]
    /// Events not kept because the log was full.
    public var dropped: Int
}

extension Encodable {
    /// Sorted-key JSON and a newline, as every control answer is written.
    public func controlJSON() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array((try? encoder.encode(self)) ?? Data("{}".utf8)) + [0x0A]
    }
}

/// What `GET /status` answers (and every successful change).
/// One direction of the link as `/status` shows it now.
public struct ControlLinkNow: Codable, Equatable, Sendable {
    /// `down` or `up`.
    public var direction: String
    /// Bits per second in force (a trace's over the next 100 ms); nil: unlimited.
    public var rateBps: Int64?
    /// One-way delay in force, milliseconds.
    public var delayMs: Double
    /// The probability a packet offered now is lost.
    public var loss: Double

    public init(_ direction: Direction, _ moment: LinkMoment) {
        self.direction = direction.rawValue
        self.rateBps = moment.rate?.bitsPerSecond
        self.delayMs = Double(moment.delay.nanoseconds) / 1e6
        self.loss = moment.loss
    }

    enum CodingKeys: String, CodingKey {
        case direction, loss
        case rateBps = "rate_bps"
        case delayMs = "delay_ms"
    }

    /// `rate_bps` is `null` when unlimited: every key always there.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.direction, forKey: .direction)
        try container.encode(self.rateBps, forKey: .rateBps)
        try container.encode(self.delayMs, forKey: .delayMs)
        try container.encode(self.loss, forKey: .loss)
    }
}

public struct ControlStatus: Codable, Equatable, Sendable {
    public var profile: String
    public var phase: String
    public var outage: String?
    public var stalled: [String]
    public var seed: UInt64
    public var elapsedSeconds: Double
    public var connectionsTotal: Int
    public var connectionsOpen: Int
    public var bytesUp: Int64
    public var bytesDown: Int64
    /// Down bytes the link has delivered to clients (`bytes_down` less what is still on the link).
    public var bytesDelivered: Int64
    /// Down bytes that crossed the link towards the clients: those delivered, and those that
    /// arrived but wait behind a lost segment until its repair (a receiver passes bytes on in
    /// order). What the link carried: the dashboard's throughput (nil where the engine does not say).
    public var linkBytesDown: Int64?
    /// How many routes beyond the access link are in force (nil: none); `GET /routes` lists them.
    public var routes: Int?
    /// Segments the emulated senders put on the link, retransmissions included (both directions).
    public var segmentsSent: Int
    public var segmentsLost: Int
    public var queueDrops: Int
    public var outageDrops: Int
    public var retransmissions: Int
    public var resets: Int
    /// Connections a `close` cut ended.
    public var closes: Int
    public var refusedConnections: Int
    public var upstreamFailures: Int
    /// Faults in force, and requests they hit so far.
    public var faults: Int
    public var faultsApplied: Int
    /// `closed` (intercepting), `open`, or nil when the profile has no portal.
    public var captivePortal: String?
    /// netcond's own timing: link timer wake-ups, and how late they came (50th, 99th percentile,
    /// maximum, in microseconds; 10 µs resolution).
    public var timerWakeups: Int
    public var timerLateUs: [Double]
    /// `proxy` or `packet`: what carries the run's traffic (nil from a netcond that did not say).
    public var engine: String?
    /// How long a byte queued now waits at the bottleneck before it goes, up and down, in
    /// milliseconds (nil where the engine does not say).
    public var queueDelayMs: [Double]?
    /// Each direction's rate, delay and loss in force now, down then up (nil from a netcond that did not say).
    public var link: [ControlLinkNow]?
    /// Each direction's packets and drops, down then up (nil from a netcond that did not say).
    public var directions: [ControlDirectionCounters]?
    /// Forward connections the kernel relays now (splice, no copy through netcond; among
    /// `connectionsOpen`), and those it took so far (among `connectionsTotal`); nil where nothing
    /// is spliced (the packet engine).
    public var splicedOpen: Int?
    public var splicedTotal: Int?

    public init(
        profile: String, phase: String, outage: String?, stalled: [String], seed: UInt64, elapsedSeconds: Double,
        connectionsTotal: Int, connectionsOpen: Int, bytesUp: Int64, bytesDown: Int64, bytesDelivered: Int64,
        segmentsSent: Int, segmentsLost: Int, queueDrops: Int, outageDrops: Int, retransmissions: Int, resets: Int,
        closes: Int, refusedConnections: Int, upstreamFailures: Int, faults: Int, faultsApplied: Int,
        captivePortal: String?, timerWakeups: Int, timerLateUs: [Double], engine: String = "proxy",
        queueDelayMs: [Double]? = nil, link: [ControlLinkNow]? = nil, linkBytesDown: Int64? = nil,
        routes: Int? = nil, directions: [ControlDirectionCounters]? = nil, splicedOpen: Int? = nil,
        splicedTotal: Int? = nil
    ) {
        self.splicedOpen = splicedOpen
        self.splicedTotal = splicedTotal
        self.routes = routes
        self.directions = directions
        self.linkBytesDown = linkBytesDown
        self.queueDelayMs = queueDelayMs
        self.link = link
        self.profile = profile
        self.phase = phase
        self.outage = outage
        self.stalled = stalled
        self.seed = seed
        self.elapsedSeconds = elapsedSeconds
        self.connectionsTotal = connectionsTotal
        self.connectionsOpen = connectionsOpen
        self.bytesUp = bytesUp
        self.bytesDown = bytesDown
        self.bytesDelivered = bytesDelivered
        self.segmentsSent = segmentsSent
        self.segmentsLost = segmentsLost
        self.queueDrops = queueDrops
        self.outageDrops = outageDrops
        self.retransmissions = retransmissions
        self.resets = resets
        self.closes = closes
        self.refusedConnections = refusedConnections
        self.upstreamFailures = upstreamFailures
        self.faults = faults
        self.faultsApplied = faultsApplied
        self.captivePortal = captivePortal
        self.timerWakeups = timerWakeups
        self.timerLateUs = timerLateUs
        self.engine = engine
    }

    enum CodingKeys: String, CodingKey {
        case profile, phase, outage, stalled, seed, engine, link, routes, directions
        case elapsedSeconds = "elapsed_seconds"
        case connectionsTotal = "connections_total"
        case connectionsOpen = "connections_open"
        case bytesUp = "bytes_up"
        case bytesDown = "bytes_down"
        case bytesDelivered = "bytes_delivered"
        case linkBytesDown = "link_bytes_down"
        case segmentsSent = "segments_sent"
        case segmentsLost = "segments_lost"
        case queueDrops = "queue_drops"
        case outageDrops = "outage_drops"
        case retransmissions
        case resets
        case closes
        case refusedConnections = "refused_connections"
        case upstreamFailures = "upstream_failures"
        case faults
        case faultsApplied = "faults_applied"
        case captivePortal = "captive_portal"
        case timerWakeups = "timer_wakeups"
        case timerLateUs = "timer_late_us_p50_p99_max"
        case queueDelayMs = "queue_delay_ms_up_down"
        case splicedOpen = "spliced_open"
        case splicedTotal = "spliced_total"
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.profile, forKey: .profile)
        try container.encode(self.engine, forKey: .engine)
        try container.encode(self.phase, forKey: .phase)
        try container.encode(self.outage, forKey: .outage)  // `null` when there is none: a stable schema
        try container.encode(self.stalled, forKey: .stalled)
        try container.encode(self.seed, forKey: .seed)
        try container.encode(self.elapsedSeconds, forKey: .elapsedSeconds)
        try container.encode(self.connectionsTotal, forKey: .connectionsTotal)
        try container.encode(self.connectionsOpen, forKey: .connectionsOpen)
        try container.encode(self.bytesUp, forKey: .bytesUp)
        try container.encode(self.bytesDown, forKey: .bytesDown)
        try container.encode(self.bytesDelivered, forKey: .bytesDelivered)
        try container.encode(self.segmentsSent, forKey: .segmentsSent)
        try container.encode(self.segmentsLost, forKey: .segmentsLost)
        try container.encode(self.queueDrops, forKey: .queueDrops)
        try container.encode(self.outageDrops, forKey: .outageDrops)
        try container.encode(self.retransmissions, forKey: .retransmissions)
        try container.encode(self.resets, forKey: .resets)
        try container.encode(self.closes, forKey: .closes)
        try container.encode(self.refusedConnections, forKey: .refusedConnections)
        try container.encode(self.upstreamFailures, forKey: .upstreamFailures)
        try container.encode(self.faults, forKey: .faults)
        try container.encode(self.faultsApplied, forKey: .faultsApplied)
        try container.encode(self.captivePortal, forKey: .captivePortal)
        try container.encode(self.timerWakeups, forKey: .timerWakeups)
        try container.encode(self.timerLateUs, forKey: .timerLateUs)
        try container.encodeIfPresent(self.queueDelayMs, forKey: .queueDelayMs)
        try container.encodeIfPresent(self.link, forKey: .link)
        try container.encodeIfPresent(self.linkBytesDown, forKey: .linkBytesDown)
        try container.encodeIfPresent(self.routes, forKey: .routes)
        try container.encodeIfPresent(self.directions, forKey: .directions)
        try container.encodeIfPresent(self.splicedOpen, forKey: .splicedOpen)
        try container.encodeIfPresent(self.splicedTotal, forKey: .splicedTotal)
    }

    public func json() -> [UInt8] { self.controlJSON() }
}

/// Every rejection: `{"error": "what is wrong; allowed: …"}`.
public struct ControlError: Codable, Equatable, Sendable {
    public var error: String

    public init(error: String) {
        self.error = error
    }
}
