import Foundation

/// How a bottleneck queue decides what to drop.
public enum QueueDiscipline: Sendable, Equatable {
    /// Drop an arrival while the queue is full (a router's default, netem's).
    case dropTail
    /// CoDel (RFC 8289): drop at the head while packets have waited more than `target` for at
    /// least `interval`, ever more often, until the standing queue is gone.
    case codel(target: Span, interval: Span)

    public static let defaultTarget = Span.milliseconds(5)
    public static let defaultInterval = Span.milliseconds(100)
}

/// CoDel's control loop (RFC 8289, section 5), run at each packet's dequeue: the moment it reaches
/// the head of the queue and would start onto the wire, with how long it waited.
///
/// ```
///  waited < target (or ≤ one packet queued ahead) ─▶ not above; leave the dropping state
///  above target for a whole interval ─▶ drop; then drop again every interval/√count
///  while it stays above; count carries over when dropping resumes soon after it stopped
/// ```
/// A FIFO served at a fixed rate knows each packet's dequeue moment when it arrives, so the
/// packet link runs this at admission, in arrival order (which is dequeue order), and a dropped
/// packet takes no time on the wire: the next one reaches the head at the same moment, as in
/// CoDel's own dequeue loop.
struct CoDelState {
    var target: Span
    var interval: Span
    private var firstAboveTime: Instant?
    private var dropNext = Instant.zero
    private var count = 0
    private var lastCount = 0
    private(set) var dropping = false

    init(target: Span, interval: Span) {
        self.target = target
        self.interval = interval
    }

    /// Whether the packet reaching the head at `now`, after waiting `sojourn` with `bytesAhead`
    /// still queued before it when it arrived, is dropped.
    mutating func shouldDrop(at now: Instant, sojourn: Span, bytesAhead: Int) -> Bool {
        let okToDrop = self.aboveTarget(at: now, sojourn: sojourn, bytesAhead: bytesAhead)
        if self.dropping {
            if !okToDrop {
                self.dropping = false
                return false
            }
            if now >= self.dropNext {
                self.count += 1
                self.dropNext = self.controlLaw(self.dropNext)
                return true
            }
            return false
        }
        guard okToDrop else { return false }
        self.dropping = true
        // Dropping resumes soon after it stopped: start near the rate it had reached.
        let delta = self.count - self.lastCount
        self.count = delta > 1 && now - self.dropNext < self.interval * 16 ? delta : 1
        self.dropNext = self.controlLaw(now)
        self.lastCount = self.count
        return true
    }

    private mutating func aboveTarget(at now: Instant, sojourn: Span, bytesAhead: Int) -> Bool {
        if sojourn < self.target || bytesAhead <= Self.maxPacket {
            self.firstAboveTime = nil
            return false
        }
        guard let first = self.firstAboveTime else {
            self.firstAboveTime = now + self.interval
            return false
        }
        return now >= first
    }

    private func controlLaw(_ t: Instant) -> Instant {
        t + Span(nanoseconds: Int64(Double(self.interval.nanoseconds) / Double(max(1, self.count)).squareRoot()))
    }

    /// One full-size packet: a queue holding no more is never "above" (RFC 8289's MAXPACKET).
    static let maxPacket = 1_514
}
