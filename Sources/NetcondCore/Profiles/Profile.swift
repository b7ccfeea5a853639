/// A resolved network profile: what the link between the client and the rest of the world looks like.
///
/// This is the in-memory model; `ProfileDecoder` builds it from YAML (with `extends`, units and
/// validation), and both engines hand it to `LinkModel`. Every field has a meaning in the README's
/// profile schema (`Profiles/README.md`).
public struct Profile: Sendable, Equatable {
    /// Short name (`edge`, `3g`); for a file, the name inside it or the file's base name.
    public var name: String
    public var description: String
    /// Where the numbers come from.
    public var source: String
    /// Client → server.
    public var up: LinkDirection
    /// Server → client.
    public var down: LinkDirection
    /// Extra time a name lookup takes before a connection to a host name starts.
    public var dnsDelay: Span
    /// Extra set-up time for every new upstream connection, on top of the one round trip the
    /// handshake costs.
    public var connectDelay: Span
    /// How the emulated sender reacts to loss.
    public var tcp: CongestionControl
    /// Largest payload of one emulated segment.
    public var mss: ByteCount
    /// Conditions that change over time (nil: the conditions above hold for the whole run).
    public var schedule: ConditionSchedule?
    /// Periodic stalls, on top of the conditions and the schedule.
    public var stalls: StallSpec?
    /// Faults injected into plain HTTP exchanges (not link conditions: a pass-through profile may
    /// have them).
    public var faults: [HTTPFault]
    /// Firewall, connect hold and DNS failures for new connections.
    public var setup: SetupRules
    /// A captive portal in front of the link (nil: none).
    public var captivePortal: CaptivePortalSpec?
    /// The paths beyond the access link to some destinations, in series with it; first match wins
    /// (none: the access link alone).
    public var routes: [Route]
    /// The device's radio on the access link, followed for its energy (nil: none). An observer:
    /// it changes nothing the link does (``RadioModel``).
    public var radio: RadioSpec?
    /// An IPv6-only access network with NAT64 and DNS64 (nil: the device has IPv4 as well).
    /// The packet engine's alone.
    public var ipv6Only: IPv6OnlySpec?

    public init(
        name: String,
        description: String = "",
        source: String = "",
        up: LinkDirection = LinkDirection(),
        down: LinkDirection = LinkDirection(),
        dnsDelay: Span = .zero,
        connectDelay: Span = .zero,
        tcp: CongestionControl = .cubic,
        mss: ByteCount = Profile.defaultMSS,
        schedule: ConditionSchedule? = nil,
        stalls: StallSpec? = nil,
        faults: [HTTPFault] = [],
        setup: SetupRules = SetupRules(),
        captivePortal: CaptivePortalSpec? = nil,
        routes: [Route] = [],
        radio: RadioSpec? = nil,
        ipv6Only: IPv6OnlySpec? = nil
    ) {
        self.radio = radio
        self.ipv6Only = ipv6Only
        self.routes = routes
        self.name = name
        self.description = description
        self.source = source
        self.up = up
        self.down = down
        self.dnsDelay = dnsDelay
        self.connectDelay = connectDelay
        self.tcp = tcp
        self.mss = mss
        self.schedule = schedule
        self.stalls = stalls
        self.faults = faults
        self.setup = setup
        self.captivePortal = captivePortal
    }

    /// Payload of a full-sized segment on a 1500-byte MTU path with 40 bytes of IPv4 + TCP header.
    public static let defaultMSS = ByteCount(bytes: 1460)

    /// Bytes of IPv4 + TCP header counted on the link for every segment (see Profiles/README.md, "Rates are link rates").
    public static let headerOverhead = ByteCount(bytes: 40)

    /// A profile that imposes nothing: no delay, no limit, no loss.
    public static let passThrough = Profile(
        name: "none",
        description: "No conditions: traffic passes at full speed.",
        source: "-"
    )

    public func direction(_ direction: Direction) -> LinkDirection {
        switch direction {
        case .up: return self.up
        case .down: return self.down
        }
    }

    /// Base round-trip time of the path: up latency + down latency.
    public var baseRTT: Span { self.up.latency + self.down.latency }

    /// The link conditions (without the schedule): what a phase that `use`s this profile gets.
    public var conditions: LinkConditions {
        get { LinkConditions(up: self.up, down: self.down, dnsDelay: self.dnsDelay, connectDelay: self.connectDelay) }
        set {
            self.up = newValue.up
            self.down = newValue.down
            self.dnsDelay = newValue.dnsDelay
            self.connectDelay = newValue.connectDelay
        }
    }

    /// What of the profile (its conditions and its schedule's) only the packet engine emulates: the
    /// stream engine refuses such a profile, naming these.
    public var packetOnlyFeatures: [String] {
        var conditions = [self.conditions]
        conditions += self.schedule?.phases.map(\.conditions) ?? []
        var seen = Set<String>()
        var features: [String] = []
        for condition in conditions {
            for (name, direction) in [("up", condition.up), ("down", condition.down)] {
                for key in direction.packetOnlyKeys where seen.insert("\(key) (\(name))").inserted {
                    features.append("\(key) (\(name))")
                }
            }
        }
        if let ipv6Only = self.ipv6Only {
            features.append("ipv6_only (NAT64 at \(ipv6Only.prefixDescription))")
        }
        for route in self.routes {
            features += route.profile.packetOnlyFeatures.map { "\($0) on route \(route.name)" }
        }
        return features
    }

    /// Why the stream engine cannot run this profile (nil: it can).
    public var streamEngineRefusal: String? {
        let features = self.packetOnlyFeatures
        guard !features.isEmpty else { return nil }
        return "profile \(self.name) uses " + features.joined(separator: ", ")
            + ", which only the packet engine emulates (a proxy carries byte streams, not packets); "
            + "run it with --engine packet (root), or drop those keys"
    }

    /// True when the profile changes nothing, so a driver may relay without the model.
    public var isPassThrough: Bool {
        self.conditions.isPassThrough && self.schedule == nil && self.stalls == nil && self.setup.isEmpty
            && self.captivePortal == nil && self.routes.isEmpty && self.radio == nil && self.ipv6Only == nil
    }

    /// Whether a lookup of `host` fails: the profile's `dns_fail`, or a route's.
    public func nameFails(_ host: String) -> Bool {
        self.setup.nameFails(host) || self.routes.contains { $0.profile.setup.nameFails(host) }
    }
}

/// Which way bytes travel. Always explicit, never implied.
public enum Direction: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Client → server.
    case up
    /// Server → client.
    case down

    public var reversed: Direction { self == .up ? .down : .up }
    public var description: String { self.rawValue }
}

/// One direction of the access link.
public struct LinkDirection: Sendable, Equatable {
    /// One-way propagation delay.
    public var latency: Span
    /// Spread of extra delay added per packet (uniform in 0...jitter); never reorders the direction.
    public var jitter: Span
    /// Link rate shared by all connections of the run; `nil` = unlimited (or a trace's).
    public var bandwidth: Bandwidth?
    /// A measured link's delivery opportunities, in place of `bandwidth` (``LinkTrace``).
    public var trace: LinkTrace?
    /// A measured link's rate, delay and loss over time, in place of `bandwidth`, `latency` and
    /// `loss` (``LinkSeries``).
    public var series: LinkSeries?
    /// Bottleneck buffer: bytes that may wait for the link; an arrival that finds it full is dropped.
    public var queue: ByteCount
    /// How packets (segments) get lost: one process per direction, shared by every connection.
    public var loss: LossSpec
    /// Optional rate per connection, behind the shared rate (``ConnectionPacer``).
    public var connectionBandwidth: Bandwidth?
    /// The queue counted in packets (`queue: 100 packets`), as router and netem queues count,
    /// instead of `queue` bytes.
    public var queuePackets: Int?
    /// Packet engine only: probability that a packet is held back `reorderGap` and overtaken.
    public var reorder: Probability
    public var reorderGap: Span
    /// Probability that a packet arrives twice.
    public var duplicate: Probability
    /// Probability that a packet arrives with a byte changed (its receiver's
    /// checksum then discards it, as it would a packet corrupted on a real path).
    public var corrupt: Probability
    /// How the bottleneck queue decides what to drop.
    public var aqm: QueueDiscipline

    public init(
        latency: Span = .zero,
        jitter: Span = .zero,
        bandwidth: Bandwidth? = nil,
        queue: ByteCount = LinkDirection.defaultQueue,
        loss: LossSpec = .none,
        connectionBandwidth: Bandwidth? = nil,
        queuePackets: Int? = nil,
        reorder: Probability = .zero,
        reorderGap: Span = LinkDirection.defaultReorderGap,
        duplicate: Probability = .zero,
        corrupt: Probability = .zero,
        aqm: QueueDiscipline = .dropTail,
        trace: LinkTrace? = nil,
        series: LinkSeries? = nil
    ) {
        self.trace = trace
        self.series = series
        self.duplicate = duplicate
        self.corrupt = corrupt
        self.aqm = aqm
        self.latency = latency
        self.jitter = jitter
        self.bandwidth = bandwidth
        self.queue = queue
        self.loss = loss
        self.connectionBandwidth = connectionBandwidth
        self.queuePackets = queuePackets
        self.reorder = reorder
        self.reorderGap = reorderGap
    }

    public static let defaultReorderGap = Span.milliseconds(10)

    /// How much the bottleneck queue holds: `queuePackets` packets, or else `queue` bytes.
    public var queueLimit: QueueLimit {
        self.queuePackets.map { .packets($0) } ?? .bytes(self.queue)
    }

    /// What only the packet engine emulates, named as a profile writes it (empty: none). Both
    /// engines drive the same link path, so a queue in packets, CoDel, duplicates and corruption
    /// (which the stream engine's receiver discards, as TCP's does: a loss) mean the same in both;
    /// a reordered segment would need the emulated receiver to answer it with duplicate
    /// acknowledgements as a real one does, which it does not yet.
    public var packetOnlyKeys: [String] {
        self.reorder > .zero ? ["reorder"] : []
    }

    public static let defaultQueue = ByteCount(bytes: 64 * 1024)

    /// The rate one connection can reach alone: the link rate or the per-connection cap, whichever
    /// is lower (nil when neither is set).
    public var pathRate: Bandwidth? {
        let shared = self.bandwidth ?? self.trace?.meanRate ?? self.series?.meanRate
        guard let cap = self.connectionBandwidth else { return shared }
        return shared.map { min($0, cap) } ?? cap
    }

    public var isPassThrough: Bool {
        self.latency == .zero && self.jitter == .zero && self.bandwidth == nil && self.trace == nil
            && self.series == nil && self.loss == .none
            && self.connectionBandwidth == nil && self.reorder == .zero && self.duplicate == .zero
            && self.corrupt == .zero
    }
}

/// The loss process of one direction.
public enum LossSpec: Sendable, Equatable {
    case none
    /// Each segment is lost independently with this probability.
    case bernoulli(Probability)
    /// Two-state Markov chain (bursts): `p` good→bad, `r` bad→good per segment, loss probability
    /// `lossInGood` (1−k) and `lossInBad` (1−h) in each state.
    case gilbertElliott(p: Probability, r: Probability, lossInGood: Probability, lossInBad: Probability)

    /// Long-run fraction of segments lost.
    public var meanRate: Double {
        switch self {
        case .none: return 0
        case .bernoulli(let p): return p.value
        case .gilbertElliott(let p, let r, let good, let bad):
            let denominator = p.value + r.value
            guard denominator > 0 else { return good.value }
            let inBad = p.value / denominator
            return inBad * bad.value + (1 - inBad) * good.value
        }
    }
}

/// How the emulated TCP sender responds to loss.
public enum CongestionControl: String, Sendable, Equatable, CaseIterable {
    /// Loss-based (Linux default): each loss shrinks the window; goodput falls with loss rate.
    case cubic
    /// Model-based: paces at the measured bottleneck rate and ignores random loss.
    case bbr
}
