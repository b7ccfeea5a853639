import NetcondCore

/// Which of a scenario's timeline events are due, and when to look again: a pure value the runner
/// drives with the clock and the marks it reads (the origin's finished responses, the bytes the
/// link delivered), so every trigger rule is testable in virtual time.
///
/// ```
///  t ─────●──────────────●─────────────●──────▶
///      at: 2s      after_request: 1   at: 9s         each event waits for its own trigger;
///                  (polled every 10 ms)              events due together apply in file order
/// ```
struct TimelinePlayer {
    /// Events not applied yet, in file order.
    private(set) var pending: [ScenarioEvent]

    /// How often marks (origin requests, delivered bytes) are looked at.
    static let markPoll = Span.milliseconds(10)

    init(_ timeline: [ScenarioEvent]) {
        self.pending = timeline
    }

    var isFinished: Bool { self.pending.isEmpty }

    /// Some pending event waits for the origin's finished responses.
    var watchesOrigin: Bool {
        self.pending.contains { if case .afterRequests = $0.trigger { true } else { false } }
    }

    /// Some pending event waits for bytes the link delivered.
    var watchesLink: Bool {
        self.pending.contains { if case .afterBytes = $0.trigger { true } else { false } }
    }

    /// Takes the events due now, in file order.
    mutating func takeDue(
        elapsed: Span, finished: Int = 0, finishedFor: [OriginTarget: Int] = [:], delivered: Int64 = 0
    ) -> [ScenarioEvent] {
        var due: [ScenarioEvent] = []
        var rest: [ScenarioEvent] = []
        for event in self.pending {
            if event.trigger.isDue(elapsed: elapsed, finished: finished, finishedFor: finishedFor, delivered: delivered)
            {
                due.append(event)
            } else {
                rest.append(event)
            }
        }
        self.pending = rest
        return due
    }

    /// How long to wait before looking again: until the next `at:` event, or one mark poll while
    /// a mark is watched; nil when nothing is pending.
    func wait(elapsed: Span) -> Span? {
        guard !self.pending.isEmpty else { return nil }
        var wait: Span? = self.watchesOrigin || self.watchesLink ? Self.markPoll : nil
        for event in self.pending {
            if case .at(let at) = event.trigger {
                let until = max(.zero, at - elapsed)
                wait = wait.map { min($0, until) } ?? until
            }
        }
        return wait
    }
}
