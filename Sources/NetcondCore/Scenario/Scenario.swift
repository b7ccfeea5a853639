/// A scenario: conditions, a timeline of changes, what the built-in origin serves, the client to
/// run and the checks that judge it. Decoded from `Scenarios/*.yaml` by ``ScenarioDecoder``; the
/// schema is documented in `Scenarios/README.md`.
///
/// ```
///  profile ──▶ link          timeline ──▶ changes at +t      origin ──▶ files + faults
///                 └──────── client (NETCOND_URL, NETCOND_OUTPUT, NETCOND_WORKDIR) ────────┘
///                                         │ exit, output files, request log
///                                         ▼
///                                 checks → verdict + evidence
/// ```
public struct Scenario: Sendable, Equatable {
    public var name: String
    public var description: String
    /// The file it came from, as the user named it.
    public var file: String
    public var profile: Profile
    public var timeline: [ScenarioEvent]
    public var origin: OriginContent
    public var client: ClientSpec
    public var checks: [CheckSpec]
    /// The engine the scenario asks for (`engine:`); nil: whatever the command line says (proxy).
    public var engine: RunEngine?

    public init(
        name: String, description: String, file: String, profile: Profile, timeline: [ScenarioEvent],
        origin: OriginContent, client: ClientSpec, checks: [CheckSpec], engine: RunEngine? = nil
    ) {
        self.engine = engine
        self.name = name
        self.description = description
        self.file = file
        self.profile = profile
        self.timeline = timeline
        self.origin = origin
        self.client = client
        self.checks = checks
    }
}

/// What carries a run's traffic through the link.
public enum RunEngine: String, Sendable, Equatable, CaseIterable {
    /// netcond's proxy (HTTP, CONNECT, SOCKS5, forwards): no privilege, any platform.
    case proxy
    /// The client's own packets (root or CAP_NET_ADMIN, Linux).
    case packet
}

/// A change of conditions, at a moment of the run or when the origin reaches a mark.
public struct ScenarioEvent: Sendable, Equatable {
    public var trigger: ScenarioTrigger
    public var action: ScenarioAction

    public init(trigger: ScenarioTrigger, action: ScenarioAction) {
        self.trigger = trigger
        self.action = action
    }
}

/// When a timeline event applies. Each event waits for its own trigger; events triggered at
/// the same moment apply in file order.
public enum ScenarioTrigger: Sendable, Equatable, CustomStringConvertible {
    /// This long after the client started.
    case at(Span)
    /// When the origin has finished this many responses (answered, cut or dropped), counted over
    /// all requests, or only those for one file or endpoint.
    case afterRequests(Int, of: OriginTarget?)
    /// When the link has delivered this many bytes to the client in all (down, every connection,
    /// headers included): bytes the client has, not bytes the origin handed to a socket buffer.
    case afterBytes(ByteCount)

    public var description: String {
        switch self {
        case .at(let span): return "at +\(span)"
        case .afterRequests(let count, let target):
            return "after response \(count)" + (target.map { " for \($0)" } ?? "")
        case .afterBytes(let bytes): return "after \(bytes) delivered"
        }
    }

    /// True once the trigger has fired: `elapsed` since the client started; the origin has
    /// finished `finished` responses in all (`finishedFor` per file or endpoint); the link has
    /// delivered `delivered` bytes to the client.
    public func isDue(elapsed: Span, finished: Int, finishedFor: [OriginTarget: Int], delivered: Int64) -> Bool {
        switch self {
        case .at(let span): return elapsed >= span
        case .afterRequests(let count, let target?): return (finishedFor[target] ?? 0) >= count
        case .afterRequests(let count, nil): return finished >= count
        case .afterBytes(let threshold): return delivered >= threshold.bytes
        }
    }
}

/// What a timeline event does; each is one of the live control changes.
public enum ScenarioAction: Sendable, Equatable, CustomStringConvertible {
    case switchProfile(Profile)
    /// Start an outage, or end the current one (nil).
    case outage(OutageBehaviour?)
    /// Stall a direction, or end the current stall (nil).
    case stall(StallDirection?)
    case addFault(HTTPFault)
    /// Remove every fault added so far (timeline and profile alike).
    case clearFaults
    /// Remove the faults with this name (the profile's or the timeline's).
    case removeFault(named: String)
    case captive(open: Bool)
    /// Cut every connection open at that moment (the link stays up).
    case cut(CutMode)
    /// Change one of the profile's routes (by name).
    case route(String, RouteChange)
    /// The device leaves its network for the profile's (Wi-Fi to cellular): every connection open
    /// then is stranded — nothing of it is carried again, either way, and neither end is told — the
    /// link carries nothing for `gap`, then it is the profile's.
    case handover(Profile, gap: Span)

    public var description: String {
        switch self {
        case .switchProfile(let profile): return "profile → \(profile.name)"
        case .outage(let behaviour): return behaviour.map { "outage (\($0))" } ?? "outage ends"
        case .stall(let direction): return direction.map { "stall (\($0))" } ?? "stall ends"
        case .addFault(let fault): return "fault: \(fault.label)"
        case .clearFaults: return "faults cleared"
        case .removeFault(let name): return "fault '\(name)' removed"
        case .captive(let open): return open ? "captive portal opens" : "captive portal closes"
        case .cut(let mode): return "connections \(mode.pastTense)"
        case .route(let name, let change): return "route \(name): \(change)"
        case .handover(let profile, let gap): return "handover → \(profile.name) after \(gap)"
        }
    }

    /// The profile the link is on after it, when it changes the profile (a switch, a handover).
    public var profileSwitchedTo: Profile? {
        switch self {
        case .switchProfile(let profile), .handover(let profile, _): return profile
        default: return nil
        }
    }
}

/// What the built-in origin serves in a scenario, besides its standard endpoints.
public struct OriginContent: Sendable, Equatable {
    /// Served at `/files/{name}`.
    public var files: [OriginFile]
    /// Served at `/api/{name}`.
    public var api: [OriginAPI]
    /// What the origin itself does to the requests that reach it (`origin.faults`).
    public var faults: [HTTPFault]

    public init(files: [OriginFile] = [], api: [OriginAPI] = [], faults: [HTTPFault] = []) {
        self.files = files
        self.api = api
        self.faults = faults
    }

    public func file(named name: String) -> OriginFile? {
        self.files.first { $0.name == name }
    }

    public func api(named name: String) -> OriginAPI? {
        self.api.first { $0.name == name }
    }
}

/// The built-in origin's name: `http://origin.netcond.test` and `https://origin.netcond.test`.
public enum OriginHost {
    public static let name = "origin.netcond.test"
    /// Every name under it reaches the built-in origin, in both engines.
    public static let domain = "netcond.test"

    /// `name` (any case, a final dot allowed) is `netcond.test` or a name under it.
    public static func isOwn(_ name: String) -> Bool {
        var lower = name.lowercased()
        if lower.hasSuffix(".") { lower.removeLast() }
        return lower == Self.domain || lower.hasSuffix("." + Self.domain)
    }
}

/// A JSON endpoint at `/api/{name}`. A `POST` one creates something each time it is called (a side
/// effect the origin counts), unless the request's `Idempotency-Key` was seen before: then it
/// answers what the first call created, as payment APIs do, and creates nothing.
public struct OriginAPI: Sendable, Equatable {
    public enum Method: String, Sendable, Equatable, CaseIterable {
        case get = "GET"
        case post = "POST"
    }

    public var name: String
    public var method: Method
    /// The JSON a `GET` answers (nil: a small default naming the endpoint).
    public var json: String?

    public init(name: String, method: Method = .get, json: String? = nil) {
        self.name = name
        self.method = method
        self.json = json
    }

    public var path: String { Self.path(of: self.name) }

    /// `/api/NAME`.
    public static func path(of name: String) -> String { "/api/\(name)" }

    /// The endpoint name in an `/api/NAME[?query]` path, or nil for any other path.
    public static func name(inPath path: String) -> String? {
        guard path.hasPrefix("/api/") else { return nil }
        return String(path.dropFirst("/api/".count).prefix { $0 != "?" })
    }
}

/// A file or an endpoint of the origin (what an `after_request` trigger counts).
public enum OriginTarget: Sendable, Hashable, CustomStringConvertible {
    case file(String)
    case api(String)

    public var description: String {
        switch self {
        case .file(let name): return OriginFile.path(of: name)
        case .api(let name): return OriginAPI.path(of: name)
        }
    }
}

/// A named file of deterministic bytes (the stream of `seed`, like `/bytes/{size}?seed=`).
public struct OriginFile: Sendable, Equatable {
    public var name: String
    public var size: ByteCount
    public var seed: UInt64

    public init(name: String, size: ByteCount, seed: UInt64 = 0) {
        self.name = name
        self.size = size
        self.seed = seed
    }

    /// The path the origin serves it at.
    public var path: String { Self.path(of: self.name) }

    /// `/files/NAME`.
    public static func path(of name: String) -> String { "/files/\(name)" }

    /// The file name in a `/files/NAME[?query]` path, or nil for any other path.
    public static func name(inPath path: String) -> String? {
        guard path.hasPrefix("/files/") else { return nil }
        return String(path.dropFirst("/files/".count).prefix { $0 != "?" })
    }
}

/// The program a scenario runs.
public struct ClientSpec: Sendable, Equatable {
    /// The command line; nil when the scenario expects it after `--`.
    public var command: [String]?
    /// `NETCOND_URL`: a path on the origin (`/files/big.bin`) or an absolute URL.
    public var url: String?
    /// `NETCOND_OUTPUT`: a file name inside the run's working directory.
    public var output: String?
    /// Extra environment variables.
    public var environment: [String: String]
    /// Where the client runs (an absolute path, resolved against the scenario's folder); nil: in
    /// the run's fresh `NETCOND_WORKDIR`.
    public var directory: String?
    /// The client is stopped (SIGTERM, then SIGKILL 2 s later) when it runs this long.
    public var deadline: Span

    public static let defaultDeadline = Span.seconds(Int64(60))

    /// The origin path `url` names: itself when it is a path, the path of an `http://` or
    /// `https://origin.netcond.test/…` URL, else nil (another server).
    public var originPath: String? {
        guard let url = self.url else { return nil }
        if url.hasPrefix("/") { return url }
        for scheme in ["http://", "https://"] {
            let prefix = scheme + OriginHost.name
            if url.lowercased().hasPrefix(prefix) {
                let rest = url.dropFirst(prefix.count)
                if rest.isEmpty { return "/" }
                if rest.hasPrefix("/") { return String(rest) }
                if rest.hasPrefix(":") { return rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/" }
            }
        }
        return nil
    }

    public init(
        command: [String]? = nil, url: String? = nil, output: String? = nil, environment: [String: String] = [:],
        deadline: Span = Self.defaultDeadline
    ) {
        self.command = command
        self.url = url
        self.output = output
        self.environment = environment
        self.deadline = deadline
    }
}

/// A check and its parameters.
public enum CheckSpec: Sendable, Equatable {
    case completes(CompletesCheck)
    case resumes(ResumesCheck)
    case backsOff(BacksOffCheck)
    case staysUsable(StaysUsableCheck)
    case idempotent(IdempotentCheck)
    case captiveSafe(CaptiveSafeCheck)
    case reconnects(ReconnectsCheck)
    case radio(RadioCheck)

    public var name: String {
        switch self {
        case .completes: return "completes"
        case .resumes: return "resumes"
        case .backsOff: return "backs-off"
        case .staysUsable: return "stays-usable"
        case .idempotent: return "idempotent"
        case .captiveSafe: return "captive-safe"
        case .reconnects: return "reconnects"
        case .radio: return "radio"
        }
    }

    public static let names = [
        "completes", "resumes", "backs-off", "stays-usable", "idempotent", "captive-safe", "reconnects",
        "radio",
    ]
}

/// The client exits with `exit` before its deadline, and each output file equals its origin file.
public struct CompletesCheck: Sendable, Equatable {
    public var exit: Int32
    public var files: [OutputFile]
    /// The endpoint the client calls (`client.url: /api/NAME`): its last call must have been
    /// answered with a success that reached the client; an exit 0 alone is not enough.
    public var endpoint: String?

    public init(exit: Int32 = 0, files: [OutputFile] = [], endpoint: String? = nil) {
        self.exit = exit
        self.files = files
        self.endpoint = endpoint
    }
}

/// A file the client writes (relative to its working directory) and the origin file it must equal.
public struct OutputFile: Sendable, Equatable {
    public var output: String
    public var file: String

    public init(output: String, file: String) {
        self.output = output
        self.file = file
    }
}

/// After a cut, the next request for the file asks for the rest: `Range: bytes=M-` with
/// N − slack ≤ M ≤ N (N: bytes the client had); all bytes served ≤ size × (1 + tolerance).
public struct ResumesCheck: Sendable, Equatable {
    public var file: String
    public var slack: ByteCount
    public var tolerance: Double

    public init(file: String, slack: ByteCount = ByteCount(bytes: 64 * 1024), tolerance: Double = 0.25) {
        self.file = file
        self.slack = slack
        self.tolerance = tolerance
    }
}

/// During failures, the gaps between the client's attempts grow by `factor` (each at least
/// factor × the previous, less `jitter`), or honour `Retry-After`; at most `maxPerMinute`
/// attempts per minute; and after the failures end the client comes back within `recovery`.
public struct BacksOffCheck: Sendable, Equatable {
    /// The file whose requests count as attempts (nil: every request to the origin).
    public var file: String?
    public var factor: Double
    public var jitter: Double
    public var maxPerMinute: Int
    /// The client must make a successful request within this long of the last failure (nil: not checked).
    public var recovery: Span?

    public init(
        file: String? = nil, factor: Double = 1.5, jitter: Double = 0.2, maxPerMinute: Int = 30, recovery: Span? = nil
    ) {
        self.file = file
        self.factor = factor
        self.jitter = jitter
        self.maxPerMinute = maxPerMinute
        self.recovery = recovery
    }
}

/// The client stays usable: its user-visible steps (lines it prints that match `lines`, or origin
/// requests whose path matches `requests`) each take at most `budget`, at least `minSteps` of
/// them happen, and with `within` the last comes that soon after the start; and, with `givesUpWithin`, it ends by itself that soon (not stopped at its
/// deadline, not killed by a signal), saying why on stderr when it fails.
public struct StaysUsableCheck: Sendable, Equatable {
    public enum Steps: Sendable, Equatable {
        /// A regular expression the client's output lines (stdout or stderr) are searched with.
        case lines(String)
        /// A glob on the path of origin requests (`/files/*`).
        case requests(String)
    }

    public var steps: Steps?
    /// With `requests`: only the requests to this host (a glob, as the origin logged it) are steps,
    /// so one destination is judged apart from the others.
    public var host: String?
    public var budget: Span
    public var minSteps: Int
    /// The last step comes within this long of the client's start (a whole page load).
    public var within: Span?
    public var givesUpWithin: Span?

    public init(
        steps: Steps? = nil, budget: Span = .seconds(Int64(5)), minSteps: Int = 1, within: Span? = nil,
        givesUpWithin: Span? = nil
    ) {
        self.steps = steps
        self.budget = budget
        self.minSteps = minSteps
        self.within = within
        self.givesUpWithin = givesUpWithin
    }
}

/// Calls to a POST endpoint create at most one object: after a lost response the client either
/// does not repeat the call, or repeats it with the same `Idempotency-Key` (which the origin
/// honours). A response must have been lost for there to be anything to judge.
/// After each handover of the timeline, the client noticed that its connection was gone and went
/// on from where it was: its first request after the new network was up reached the origin within
/// `within`, and every request in flight at the handover was asked again and answered whole — a
/// file it had part of, for the rest (`Range`), unless `resume` is false.
public struct ReconnectsCheck: Sendable, Equatable {
    public var within: Span
    public var resume: Bool

    public init(within: Span = .seconds(10), resume: Bool = true) {
        self.within = within
        self.resume = resume
    }
}

public struct IdempotentCheck: Sendable, Equatable {
    /// The endpoint name (`/api/NAME`).
    public var api: String

    public init(api: String) {
        self.api = api
    }
}

/// Behind a captive portal the client never leaves the portal's page (or a mix of it and the
/// data) in its output files, never exits 0 with wrong data, and once the portal opens it
/// completes: exit `exit`, every file byte-identical.
public struct CaptiveSafeCheck: Sendable, Equatable {
    public var exit: Int32
    public var files: [OutputFile]

    public init(exit: Int32 = 0, files: [OutputFile] = []) {
        self.exit = exit
        self.files = files
    }
}

/// The device's radio (the profile's `radio:`) was powered for at most `maxOnShare` of the run and
/// woke at most `maxPromotionsPerMinute` times a minute: a client that batches its transfers and
/// lets the radio sleep passes, one that polls every few seconds keeps it on and fails.
public struct RadioCheck: Sendable, Equatable {
    /// Largest share of the run the radio may be on (promotion, active, tails).
    public var maxOnShare: Probability?
    public var maxPromotionsPerMinute: Double?

    public init(maxOnShare: Probability? = nil, maxPromotionsPerMinute: Double? = nil) {
        self.maxOnShare = maxOnShare
        self.maxPromotionsPerMinute = maxPromotionsPerMinute
    }
}
