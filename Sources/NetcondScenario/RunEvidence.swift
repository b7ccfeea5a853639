import Foundation
import NetcondCore
import NetcondOrigin

/// What a run left behind for the checks to judge: how the client ended, what the origin saw, and
/// where the client's files are. Times are seconds since the client started.
public struct RunEvidence: Sendable {
    public struct Request: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var method: String
        /// The host it asked for (`cdn.netcond.test`), lower case, without the port; nil when
        /// it named none.
        public var host: String?
        /// Path without the query (`/files/big.bin`).
        public var path: String
        public var range: String?
        public var idempotencyKey: String?
        /// What made it a conditional GET, as sent (`If-None-Match: "abc"`, `If-Modified-Since: …`);
        /// nil for a request that named no copy of the client's. Whether it was answered 304 is
        /// the origin's decision (``status``): a validator that does not match gets the whole answer.
        public var condition: String? = nil
        public var status: Int?
        public var retryAfter: String?
        public var bodyBytesSent: Int64
        public var completed: Bool
        /// Seconds since the client started when the origin finished (or cut) the response.
        public var ended: Double?
        /// Seconds since the client started when the origin wrote the response head (until then the
        /// request waited on the server).
        public var responded: Double?
        /// A POST's side effect at the origin.
        public var effect: OriginEffect?
        /// The origin fault that acted on it, when one did.
        public var originFault: FaultAction?
        /// For an attempt that never reached the origin: how it ended.
        public var connectFailure: AttemptOutcome?
        /// Body bytes the origin sent that never reached the client: the connection ended (the link
        /// cut it, or the client left) while they sat in socket buffers or on the link.
        public var undelivered: Int64 = 0
        /// How far ``undelivered`` may overstate the loss (behind TLS the proxy counts ciphertext).
        public var undeliveredUncertainty: Int64 = 0
        /// How the link ended the connection, if it did.
        public var linkCut: CutMode?
        /// When the response's last byte reached the client's socket (seconds since the client
        /// started): later than ``ended`` by what the link held. Nil when not known (a response
        /// cut short, the packet engine).
        public var received: Double?
        /// Seconds after its client's FIN reached netcond that this request reached the origin:
        /// it was on the emulated link when the client closed (or shut down its sending side),
        /// and went on as on a network. Nil for a request that arrived before.
        public var afterClientFIN: Double?

        public init(
            at: Double, method: String = "GET", path: String, range: String? = nil, idempotencyKey: String? = nil,
            status: Int? = 200, retryAfter: String? = nil, bodyBytesSent: Int64 = 0, completed: Bool = true,
            ended: Double? = nil, effect: OriginEffect? = nil
        ) {
            self.at = at
            self.method = method
            self.path = path
            self.range = range
            self.idempotencyKey = idempotencyKey
            self.status = status
            self.retryAfter = retryAfter
            self.bodyBytesSent = bodyBytesSent
            self.completed = completed
            self.ended = ended
            self.effect = effect
        }

        /// What did not reach the client was stopped by the run's end (the client was stopped at
        /// its deadline with the connection open), not by the network: not a cut the client must
        /// answer for (``cutByNetwork``), though it did not get the whole response (``cutShort``).
        public var stoppedByRunEnd = false

        /// Body bytes that reached the client.
        public var bodyBytesReceived: Int64 {
            max(0, self.bodyBytesSent - self.undelivered)
        }

        /// The client got less than the whole response: the origin cut it, or the connection
        /// ended with some of it still on the way.
        public var cutShort: Bool {
            !self.completed || self.undelivered > 0
        }

        /// Cut short by the origin or the network (what a client is judged on): not by the run's end.
        public var cutByNetwork: Bool {
            !self.completed || (self.undelivered > 0 && !self.stoppedByRunEnd)
        }

        /// Failed from the client's point of view: an error status, no answer, or a cut body.
        var failed: Bool {
            guard let status = self.status else { return true }
            return status >= 500 || status == 429 || status == 408 || self.cutByNetwork
        }

        /// The `M` of `Range: bytes=M-` (nil without a Range header or for another form).
        var rangeStart: Int64? {
            guard let range = self.range?.trimmingCharacters(in: .whitespaces).lowercased(), range.hasPrefix("bytes=")
            else { return nil }
            let spec = range.dropFirst("bytes=".count)
            guard let dash = spec.firstIndex(of: "-"), !spec.contains(",") else { return nil }
            return Int64(spec[..<dash].trimmingCharacters(in: .whitespaces))
        }

        /// The `N` of `Range: bytes=M-N`, read as the origin reads it (nil when open-ended, without
        /// a Range header or for another form).
        var rangeEnd: Int64? {
            guard let range = self.range, case .closed(_, let last) = ByteRangeRequest(header: range) else {
                return nil
            }
            return last
        }
    }

    /// A connection the proxy tried to open for the client and that failed (an outage refused or
    /// reset it, a blackhole left it unanswered): an attempt that never reached the origin.
    public struct FailedConnect: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var host: String
        public var port: Int
        public var outcome: AttemptOutcome

        public init(at: Double, host: String, port: Int, outcome: AttemptOutcome) {
            self.at = at
            self.host = host
            self.port = port
            self.outcome = outcome
        }
    }

    /// A connection to the origin that was made, but held past the link's set-up time (SYNs
    /// swallowed by a blackhole or lost, a held connect): the client's connect to netcond had
    /// succeeded at once, so a connect time-out it set could not fire meanwhile.
    public struct HeldConnect: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        /// Seconds past the link's set-up time.
        public var heldFor: Double

        public init(at: Double, heldFor: Double) {
            self.at = at
            self.heldFor = heldFor
        }
    }

    /// A line the client printed.
    public struct OutputLine: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var stderr: Bool
        public var text: String

        public init(at: Double, stderr: Bool = false, text: String) {
            self.at = at
            self.stderr = stderr
            self.text = text
        }
    }

    /// What the link recorded of itself: its state changes (phases, stalls, outages, cuts), the
    /// faults it applied and the portal's doings, for the report's timeline.
    public struct LinkEvent: Sendable, Equatable {
        /// What kind of moment: the raw values are the JSON report's `kind`.
        public enum Kind: String, Sendable, Equatable, Codable, CaseIterable {
            /// The link's state changed (a phase, a stall, an outage, a cut).
            case link
            /// A fault was applied to a request.
            case fault
            /// The captive portal did something.
            case captive
        }

        public var at: Double
        public var kind: Kind
        public var detail: String

        public init(at: Double, kind: Kind, detail: String) {
            self.at = at
            self.kind = kind
            self.detail = detail
        }
    }

    /// What the captive portal did, from the proxy's event log.
    public struct PortalEvent: Sendable, Equatable {
        /// Seconds since the client started.
        public var at: Double
        public var kind: PortalAction
        public var detail: String

        public init(at: Double, kind: PortalAction, detail: String = "") {
            self.at = at
            self.kind = kind
            self.detail = detail
        }
    }

    /// How the client's traffic met the link. Through the proxy (`stream`) some connection-level
    /// failures cannot reach the client as a network would show them (see ``ProxyFidelity``).
    public enum Engine: String, Sendable {
        case stream
        case packet
    }

    public var engine: Engine = .stream
    /// The least round trip the link could give a request (seconds): the latencies of the
    /// scenario's profile, or of the quickest it switches to; 0 when unknown. No answer can leave
    /// the origin, reach the client and bring a request sent upon it back sooner.
    public var linkRoundTrip: Double = 0
    /// Which TCP sender the run's servers used: under the stream engine the model of the profile's
    /// `tcp:`; under the packet engine the origin's kernel sender (``SenderReport``).
    public var sender: String?
    public var exit: ExitStatus?
    /// The client was stopped at its deadline.
    public var timedOut: Bool
    public var deadline: Span
    /// Seconds from the client's start to its end.
    public var duration: Double
    public var requests: [Request]
    /// Connections to the origin that failed before reaching it.
    public var failedConnects: [FailedConnect]
    /// Connections to the origin that were made late (see ``HeldConnect``).
    public var heldConnects: [HeldConnect] = []
    public var workingDirectory: String
    /// The user the client ran as when it was not netcond's own (`--user`): the checks read only
    /// files that user owns, so that a client cannot have them quote a file it could not read.
    public var clientUser: UInt32?
    public var origin: OriginContent
    /// The lines the client printed (the first ``OutputCapture/maxLines``).
    public var lines: [OutputLine]
    /// The last lines it wrote to stderr.
    public var stderrTail: String
    public var portal: [PortalEvent]
    public var linkEvents: [LinkEvent] = []
    /// The span the radio is judged over: the client's deadline, its time budget (or the run, when
    /// it ran past it). Not the client's own run: a client could lower its share by staying alive
    /// longer, or raise it by quitting early, without sending a byte more or less.
    public var radioWindow: Double { max(self.duration, self.deadline.seconds) }

    /// The handovers the timeline made, in order.
    public var handovers: [Handover] = []

    /// A handover: when (seconds since the client started), how long the link carried nothing,
    /// and the profile the device moved to.
    public struct Handover: Sendable, Equatable {
        public var at: Double
        public var gap: Double
        public var to: String

        public init(at: Double, gap: Double, to: String) {
            self.at = at
            self.gap = gap
            self.to = to
        }

        /// When the new network was up.
        public var back: Double { self.at + self.gap }
    }
    /// How the client's traffic slipped past the link (a command run as root that left its cgroup or
    /// changed the rules; connections that reached the origin without crossing the link): the
    /// profile's conditions did not hold for it, and every verdict says so.
    public var bypasses: [String] = []
    /// Where the packet engine's link fell short of the profile, by the engine's own count: packets
    /// the kernel dropped while netcond held them or before it could read them (the client met more
    /// loss than the profile's), packets let go before the link decided (a better link), packets
    /// the kernel passed whose copies netcond never read (the evidence misses them). Every verdict
    /// says so.
    public var shortfalls: [String] = []
    /// Changes made to the conditions from outside the scenario while it ran (through the control
    /// API, with the run's token): the verdicts rest on conditions the scenario did not set, and say so.
    public var interventions: [String] = []
    /// What the device's radio did over the client's run (nil: the profile has no `radio:`).
    public var radio: RadioReport?

    public init(
        exit: ExitStatus?, timedOut: Bool, deadline: Span, duration: Double, requests: [Request],
        failedConnects: [FailedConnect] = [], workingDirectory: String, origin: OriginContent,
        lines: [OutputLine] = [], stderrTail: String = "", portal: [PortalEvent] = []
    ) {
        self.exit = exit
        self.timedOut = timedOut
        self.deadline = deadline
        self.duration = duration
        self.requests = requests
        self.failedConnects = failedConnects
        self.workingDirectory = workingDirectory
        self.origin = origin
        self.lines = lines
        self.stderrTail = stderrTail
        self.portal = portal
    }

    /// GETs of one origin file, in order.
    func gets(of file: String) -> [Request] {
        let path = OriginFile.path(of: file)
        return self.requests.filter { $0.method == "GET" && $0.path == path }
    }
}
