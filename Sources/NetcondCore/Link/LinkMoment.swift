/// What one direction of the link is at a moment: the rate, one-way delay and loss in force (a
/// trace's or a step series' value then, a fixed profile's always), and whether an outage or a
/// stall stops it. What the report's link lane draws and the control API's status shows.
///
/// ```
///  step series   0 s 2 Mbit/s 40 ms │ 4 s 200 kbit/s 120 ms │ 24 s 2 Mbit/s   → the row in force
///  mahimahi      opportunities in the 100 ms from the moment × 1,500 B        → their rate
///  fixed         bandwidth, latency, the loss process's mean                  → always the same
/// ```
public struct LinkMoment: Sendable, Equatable {
    /// Bits per second (nil: unlimited).
    public var rate: Bandwidth?
    /// One-way delay (latency; jitter adds to it per packet).
    public var delay: Span
    /// The probability that a packet offered now is lost (a model's long-run mean).
    public var loss: Double
    /// An outage (`refuse`, `blackhole`, `reset`) in force, or nil.
    public var outage: OutageBehaviour?
    /// No byte moves this way now (a stall).
    public var stalled: Bool

    public init(rate: Bandwidth?, delay: Span, loss: Double, outage: OutageBehaviour? = nil, stalled: Bool = false) {
        self.rate = rate
        self.delay = delay
        self.loss = loss
        self.outage = outage
        self.stalled = stalled
    }

    /// How long a trace's rate is counted over: its opportunities are milliseconds apart, so one
    /// moment's rate is the rate of the window that starts there.
    public static let traceWindow = Span.milliseconds(100)
}

extension LinkDirection {
    /// The rate, delay and loss in force at `moment` of the run (the run's clock: the one a trace
    /// or a step series counts from).
    public func moment(at moment: Instant) -> LinkMoment {
        if let series = self.series {
            let now = series.conditions(at: moment)
            return LinkMoment(rate: now.rate, delay: now.delay, loss: now.loss.value)
        }
        if let trace = self.trace {
            let count = trace.count(from: moment, to: moment + LinkMoment.traceWindow)
            let bits = count * Int64(LinkTrace.opportunityBytes) * 8
            return LinkMoment(
                rate: Bandwidth(bitsPerSecond: bits * 1_000_000_000 / LinkMoment.traceWindow.nanoseconds),
                delay: self.latency, loss: self.loss.meanRate)
        }
        return LinkMoment(rate: self.bandwidth, delay: self.latency, loss: self.loss.meanRate)
    }
}

extension ConditionTimeline {
    /// One direction at `now`, with the outage or stall the timeline has in force.
    public func moment(_ direction: Direction, at now: Instant) -> LinkMoment {
        var moment = self.conditions.direction(direction).moment(at: now)
        moment.outage = self.outage
        moment.stalled = self.isStalled(direction)
        return moment
    }
}

extension LinkDirection {
    /// The one-way delay in force at `moment`, jitter aside: a step series' row then, the latency
    /// otherwise. What control traffic takes — a refusal's or a cut's reset, a `dns_fail` answer,
    /// an acknowledgement — so that under a series it is that moment's delay, not the first row's.
    public func delay(at moment: Instant) -> Span {
        self.series?.conditions(at: moment).delay ?? self.latency
    }
}

extension LinkConditions {
    /// A round trip that leaves at `moment`: the up delay in force then, and the down delay in
    /// force when the answer leaves the far end.
    public func roundTrip(from moment: Instant) -> Span {
        let up = self.up.delay(at: moment)
        return up + self.down.delay(at: moment + up)
    }
}
