/// A check and its parameters.
public enum CheckSpec: Sendable, Equatable {
    case completes(CompletesCheck)
    case resumes(ResumesCheck)
    case backsOff(BacksOffCheck)
    case staysUsable(StaysUsableCheck)
    case idempotent(IdempotentCheck)
    case captiveSafe(CaptiveSafeCheck)
    case reconnects(ReconnectsCheck)
    case revalidates(RevalidatesCheck)
    case overlaps(OverlapsCheck)
    case delivers(DeliversCheck)
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
        case .revalidates: return "revalidates"
        case .overlaps: return "overlaps"
        case .delivers: return "delivers"
        case .radio: return "radio"
        }
    }

    public static let names = [
        "completes", "resumes", "backs-off", "stays-usable", "idempotent", "captive-safe", "reconnects",
        "revalidates", "overlaps", "delivers", "radio",
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

/// Calls to a POST endpoint create at most one object: after a lost response the client either
/// does not repeat the call, or repeats it with the same `Idempotency-Key` (which the origin
/// honours). A response must have been lost for there to be anything to judge.
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

/// The client asks whether a resource changed instead of downloading it again: after its first
/// whole copy, every later GET of the (unchanged) resource is conditional (`If-None-Match`,
/// `If-Modified-Since`) and answered 304. At least `minFetches` GETs in all.
public struct RevalidatesCheck: Sendable, Equatable {
    /// The file or GET endpoint whose fetches are judged.
    public var target: OriginTarget
    public var minFetches: Int

    public init(target: OriginTarget, minFetches: Int = 2) {
        self.target = target
        self.minFetches = minFetches
    }

    /// The origin path of the resource (`/files/NAME`, `/api/NAME`).
    public var path: String { self.target.description }
}

/// The client sends independent requests together instead of one after the other: among the origin
/// requests whose path matches `requests` (and host `host`), at least `minInFlight` different ones
/// (by host and path) were in flight at once, and at least `minRequests` different ones reached the
/// origin. In flight, as the origin can tell in
/// either engine: from its arrival until its answer could have crossed the link back and a request
/// sent upon it have come up again (the origin's end plus the link's least round trip).
public struct OverlapsCheck: Sendable, Equatable {
    /// A glob on the path of origin requests (`/files/*`).
    public var requests: String
    /// A glob on the host the requests asked for (nil: any).
    public var host: String?
    public var minInFlight: Int
    public var minRequests: Int

    public init(requests: String, host: String? = nil, minInFlight: Int = 2, minRequests: Int? = nil) {
        self.requests = requests
        self.host = host
        self.minInFlight = minInFlight
        self.minRequests = minRequests ?? minInFlight
    }
}

/// Changes the client made while the network was down reach the origin once it is back: calls to a
/// POST endpoint, each change once (by its `Idempotency-Key`, whose last number is the change's:
/// `change-3`), all `count` of them, in order, the last within `within` of the network's return.
public struct DeliversCheck: Sendable, Equatable {
    /// The POST endpoint (`/api/NAME`).
    public var api: String
    public var count: Int
    public var within: Span
    /// When the network came back: the timeline's last `{at: T, outage: end}` (set with the
    /// timeline, after the checks are read).
    public var returnsAt: Span

    public init(api: String, count: Int, within: Span = .seconds(Int64(10)), returnsAt: Span = .zero) {
        self.api = api
        self.count = count
        self.within = within
        self.returnsAt = returnsAt
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
