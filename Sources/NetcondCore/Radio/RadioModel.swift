/// The device's radio, followed from the moments packets cross the access link at the device's end
/// (``LinkNetwork`` tells it: an up packet when the device sends it, whatever its fate; a down
/// packet when it reaches the device). Pure and in virtual time.
///
/// ```
///  moments:   |  | |                          |                         (packets)
///  state:     [prom][active+100ms][tail 10 s ......][active][tail 10 s ...........][idle
///             ▲ promotion: the radio was idle   ▲ a packet during a tail: active again, no promotion
/// ```
///
/// An **observer only**: on a real device traffic that wakes the radio waits for the promotion;
/// here the link carries it as the profile says, and the model counts the moments that came during
/// a promotion as if they came at its end (the radio's timers start then). A packet during a tail
/// makes the radio active again at once (3G's FACH → DCH promotion of ~1.5 s is not counted).
public struct RadioModel: Sendable, Equatable {
    /// The constants in force (a profile switch may change them; the state is kept).
    public private(set) var spec: RadioSpec
    /// The intervals closed so far, in order, each with the power drawn in it.
    public private(set) var intervals: [RadioInterval] = []
    /// The latest moment noted (a moment before it counts as at it).
    private var latest: Instant = .zero
    /// Intervals are closed up to here.
    private var emitted: Instant = .zero
    /// Since when the radio has been idle (nil: it is on).
    private var idleSince: Instant? = .zero
    /// The current active stretch began here; it lasts until `activeUntil` unless a packet comes.
    private var activeSince: Instant = .zero
    private var activeUntil: Instant = .zero
    /// Promotions so far.
    public private(set) var promotions = 0

    public init(spec: RadioSpec) {
        self.spec = spec
    }

    /// A packet crossed the access link at the device's end at `now`.
    public mutating func note(at now: Instant) {
        let now = max(now, self.latest)
        self.latest = now
        if self.idleSince == nil, now <= self.activeUntil {
            // Active (or waking: the radio's timers start at the promotion's end).
            self.activeUntil = max(self.activeUntil, now + self.spec.inactivity)
            return
        }
        self.emit(upTo: now)
        if self.idleSince != nil {
            self.promote(at: now)
        } else {
            // In a tail: active again.
            self.activeSince = now
            self.activeUntil = now + self.spec.inactivity
        }
    }

    /// New constants from `now` (a profile switch): the state is kept, its timers run on with the
    /// new lengths, and what came before keeps the powers it was drawn at.
    public mutating func switchSpec(to spec: RadioSpec, at now: Instant) {
        let now = max(now, self.latest)
        self.latest = now
        self.emit(upTo: now)
        self.spec = spec
    }

    /// Every interval up to `end`, the ones still open closed there (the model itself goes on).
    public func intervals(upTo end: Instant) -> [RadioInterval] {
        var copy = self
        copy.emit(upTo: max(end, self.latest))
        return copy.intervals
    }

    // MARK: - Steps

    private mutating func promote(at now: Instant) {
        self.promotions += 1
        self.idleSince = nil
        let end = now + self.spec.promotion
        self.append(.promotion, now, end)
        self.activeSince = end
        self.activeUntil = end + self.spec.inactivity
    }

    /// Closes what the radio did before `now` as its state stands: the active stretch, the part
    /// of each tail before `now`, and idle from the tails' end when they are over.
    private mutating func emit(upTo now: Instant) {
        if let idleSince = self.idleSince {
            self.append(.idle, idleSince, now)
            return
        }
        self.append(.active, self.activeSince, min(self.activeUntil, now))
        guard now > self.activeUntil else { return }
        let tailEnd = self.activeUntil + self.spec.tail
        let secondEnd = tailEnd + self.spec.secondTail
        self.append(.tail, self.activeUntil, min(tailEnd, now))
        if now > tailEnd { self.append(.secondTail, tailEnd, min(secondEnd, now)) }
        if now >= secondEnd {
            self.idleSince = secondEnd
            self.append(.idle, secondEnd, now)
        }
    }

    /// Adds `[from, to)` in `state`, less what was closed already (nothing when empty); joins it
    /// to the last one when that is the same state at the same power and ends where it starts.
    private mutating func append(_ state: RadioState, _ from: Instant, _ to: Instant) {
        let from = max(from, self.emitted)
        guard to > from else { return }
        self.emitted = to
        let power = self.spec.power(state)
        if var last = self.intervals.last, last.state == state, last.power == power, last.end == from {
            last.end = to
            self.intervals[self.intervals.count - 1] = last
            return
        }
        self.intervals.append(RadioInterval(state: state, start: from, end: to, power: power))
    }
}

/// A stretch of time the radio spent in one state.
public struct RadioInterval: Sendable, Equatable {
    public var state: RadioState
    public var start: Instant
    public var end: Instant
    /// What the radio drew meanwhile (the constants in force then).
    public var power: Power

    public init(state: RadioState, start: Instant, end: Instant, power: Power) {
        self.state = state
        self.start = start
        self.end = end
        self.power = power
    }

    public var duration: Span { self.end - self.start }
}
