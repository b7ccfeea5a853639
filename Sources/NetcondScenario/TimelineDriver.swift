import NIOCore
import NetcondCore

/// Where a scenario run's time comes from: the wall clock in a run, a virtual one in tests.
protocol RunClock: Sendable {
    /// Time since the client started.
    func elapsed() -> Span
    func sleep(for span: Span) async
}

/// The wall clock, counted from the client's start.
struct WallClock: RunClock {
    let started: NIODeadline

    func elapsed() -> Span {
        Span(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds - self.started.uptimeNanoseconds))
    }

    func sleep(for span: Span) async {
        try? await Task.sleep(nanoseconds: UInt64(max(span.nanoseconds, 0)))
    }
}

/// What a timeline's mark triggers watch, read afresh on each look.
struct TimelineMarks: Sendable, Equatable {
    /// Origin requests finished so far, in all and per file or endpoint.
    var finished = 0
    var finishedFor: [OriginTarget: Int] = [:]
    /// Bytes the link has delivered to clients.
    var delivered: Int64 = 0
}

/// Plays a scenario's timeline during a run: each event waits for its trigger (a moment, or a mark
/// the origin or the link reaches, looked at every ``TimelinePlayer/markPoll``), then is applied;
/// events due together apply in file order. Time, the marks and the applying are handed in, so the
/// whole loop runs in virtual time in tests.
struct TimelineDriver: Sendable {
    let clock: any RunClock
    /// Reads the marks; told which the pending events watch (origin, link), so a run that
    /// watches neither asks nothing.
    let marks: @Sendable (_ origin: Bool, _ link: Bool) async -> TimelineMarks
    /// Applies one action; returns a note on how it went, if there is one worth saying
    /// ("none of that name was in force").
    let apply: @Sendable (ScenarioAction) async -> String?
    /// Told each applied event as it happens (`+1.0 s  outage (blackhole)`).
    var onEvent: (@Sendable (String) -> Void)? = nil

    /// Plays `timeline` until every event has happened or the task is cancelled; returns what was
    /// applied and when (seconds since the client started).
    func play(_ timeline: [ScenarioEvent]) async -> [(at: Double, what: String)] {
        var applied: [(at: Double, what: String)] = []
        var player = TimelinePlayer(timeline)
        while !player.isFinished && !Task.isCancelled {
            let elapsed = self.clock.elapsed()
            let marks =
                (player.watchesOrigin || player.watchesLink)
                ? await self.marks(player.watchesOrigin, player.watchesLink) : TimelineMarks()
            let due = player.takeDue(
                elapsed: elapsed, finished: marks.finished, finishedFor: marks.finishedFor, delivered: marks.delivered)
            for event in due {
                let note = await self.apply(event.action)
                let at = Double(self.clock.elapsed().nanoseconds) / 1e9
                var what = event.action.description
                if let note { what += " (\(note))" }
                if case .at = event.trigger {} else { what += " (\(event.trigger))" }
                applied.append((at, what))
                self.onEvent?(String(format: "+%.1f s  %@", at, what))
            }
            guard let wait = player.wait(elapsed: elapsed) else { break }
            await self.clock.sleep(for: max(wait, .milliseconds(1)))
        }
        return applied
    }
}
