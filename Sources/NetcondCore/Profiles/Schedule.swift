/// What the link looks like at one moment: the part of a profile that a schedule phase, a live
/// switch or a scenario timeline can change. (`tcp` and `mss` belong to the profile as a whole: a
/// connection keeps the sender it was opened with.)
public struct LinkConditions: Sendable, Equatable {
    public var up: LinkDirection
    public var down: LinkDirection
    public var dnsDelay: Span
    public var connectDelay: Span

    /// True when these conditions change nothing: no delay, rate, loss or set-up cost.
    public var isPassThrough: Bool {
        self.up.isPassThrough && self.down.isPassThrough && self.dnsDelay == .zero && self.connectDelay == .zero
    }

    public init(
        up: LinkDirection = LinkDirection(),
        down: LinkDirection = LinkDirection(),
        dnsDelay: Span = .zero,
        connectDelay: Span = .zero
    ) {
        self.up = up
        self.down = down
        self.dnsDelay = dnsDelay
        self.connectDelay = connectDelay
    }

    public func direction(_ direction: Direction) -> LinkDirection {
        direction == .up ? self.up : self.down
    }

    /// Base round-trip time of the path: up latency + down latency.
    public var baseRTT: Span { self.up.latency + self.down.latency }
}

/// A duration that is either fixed (`30s`) or drawn uniformly from a range (`20s..40s`) each time
/// it is used, from the run's seeded stream.
public struct SpanRange: Sendable, Equatable, CustomStringConvertible {
    public var lower: Span
    public var upper: Span

    public init(_ lower: Span, _ upper: Span) {
        precondition(lower <= upper)
        self.lower = lower
        self.upper = upper
    }

    public init(exactly span: Span) {
        self.init(span, span)
    }

    public var isFixed: Bool { self.lower == self.upper }

    public func draw(_ random: inout SeededRandom) -> Span {
        guard !self.isFixed else { return self.lower }
        let spread = Double(self.upper.nanoseconds - self.lower.nanoseconds)
        return self.lower + Span(nanoseconds: Int64(random.nextUnit() * spread))
    }

    public var description: String {
        self.isFixed ? self.lower.description : "\(self.lower)..\(self.upper)"
    }
}

/// How an outage treats connections (see Profiles/README.md, "Outages").
///
/// | behaviour   | open connections                        | new connections                 |
/// | ----------- | --------------------------------------- | ------------------------------- |
/// | `blackhole` | nothing passes; TCP retries with backoff | hang in set-up (SYNs are lost)  |
/// | `refuse`    | nothing passes; TCP retries with backoff | refused (502, SOCKS5 5, RST)    |
/// | `reset`     | reset when the outage starts            | refused                         |
public enum OutageBehaviour: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    case blackhole
    case refuse
    case reset

    public var description: String { self.rawValue }
}

/// How a cut ends the connections open at that moment (a timeline's `cut:`, `POST /cut`).
public enum CutMode: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// A TCP reset, as a NAT or middlebox that lost the connection's state answers: the client
    /// reads "connection reset".
    case reset
    /// An orderly close (FIN) at once, bytes still on the link dropped: the stream just ends early,
    /// and only a client that checks `Content-Length` notices.
    case close

    public var description: String { self.rawValue }

    /// What it did to a connection: `reset`, `closed`.
    public var pastTense: String {
        switch self {
        case .reset: return "reset"
        case .close: return "closed"
        }
    }
}

/// Which way a stall stops bytes.
public enum StallDirection: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    case up
    case down
    case both

    public var directions: [Direction] {
        switch self {
        case .up: return [.up]
        case .down: return [.down]
        case .both: return [.up, .down]
        }
    }

    public var description: String { self.rawValue }
}

/// Periodic stalls: every `every` (start to start, counted from the start of the run), no byte
/// moves in `direction` for `duration`; connections stay open.
public struct StallSpec: Sendable, Equatable {
    public var every: SpanRange
    public var duration: SpanRange
    public var direction: StallDirection

    public init(every: SpanRange, duration: SpanRange, direction: StallDirection = .both) {
        self.every = every
        self.duration = duration
        self.direction = direction
    }
}

/// One phase of a schedule: conditions for a while, optionally with an outage or a stall.
public struct SchedulePhase: Sendable, Equatable {
    /// What the status line and the event log call this phase (`lte`, `tunnel`, `offline`).
    public var label: String
    public var duration: SpanRange
    public var conditions: LinkConditions
    public var outage: OutageBehaviour?
    public var stall: StallDirection?

    public init(
        label: String,
        duration: SpanRange,
        conditions: LinkConditions,
        outage: OutageBehaviour? = nil,
        stall: StallDirection? = nil
    ) {
        self.label = label
        self.duration = duration
        self.conditions = conditions
        self.outage = outage
        self.stall = stall
    }
}

/// Conditions that change over time: the phases in order, then either the profile's own
/// conditions for good, or (when `repeats`) the phases again from the first.
public struct ConditionSchedule: Sendable, Equatable {
    public var phases: [SchedulePhase]
    public var repeats: Bool

    public init(phases: [SchedulePhase], repeats: Bool) {
        precondition(!phases.isEmpty)
        self.phases = phases
        self.repeats = repeats
    }
}
