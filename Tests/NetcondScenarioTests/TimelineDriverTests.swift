import NIOConcurrencyHelpers
import Testing

@testable import NetcondCore
@testable import NetcondScenario

/// A clock that stands still until the code under test sleeps: then it jumps ahead by exactly
/// that much, so every moment the timeline acts at is exact.
final class VirtualClock: RunClock {
    private let now = NIOLockedValueBox(Span.zero)

    func elapsed() -> Span { self.now.withLockedValue { $0 } }

    func sleep(for span: Span) async {
        self.now.withLockedValue { $0 = $0 + span }
    }
}

/// The runner's timeline loop in virtual time: when each event is applied, how mark triggers are
/// looked at, and what the applied timeline says.
@Suite struct TimelineDriverTests {
    /// Records the actions applied, with the virtual moment of each.
    final class Recorder: Sendable {
        let actions = NIOLockedValueBox<[(Span, ScenarioAction)]>([])
    }

    func driver(
        _ clock: VirtualClock, _ recorder: Recorder, note: String? = nil,
        marks: @escaping @Sendable (Span) -> TimelineMarks = { _ in TimelineMarks() }
    ) -> TimelineDriver {
        TimelineDriver(
            clock: clock,
            marks: { _, _ in marks(clock.elapsed()) },
            apply: { action in
                recorder.actions.withLockedValue { $0.append((clock.elapsed(), action)) }
                return note
            })
    }

    @Test func momentsAreKeptExactlyAndTiesApplyInFileOrder() async {
        let clock = VirtualClock(), recorder = Recorder()
        let applied = await self.driver(clock, recorder).play([
            ScenarioEvent(trigger: .at(.seconds(8)), action: .outage(nil)),
            ScenarioEvent(trigger: .at(.zero), action: .outage(.blackhole)),
            ScenarioEvent(trigger: .at(.milliseconds(2500)), action: .stall(.down)),
            ScenarioEvent(trigger: .at(.milliseconds(2500)), action: .cut(.reset)),
        ])
        #expect(applied.map(\.at) == [0, 2.5, 2.5, 8])
        #expect(
            recorder.actions.withLockedValue { $0.map(\.1) } == [
                .outage(.blackhole), .stall(.down), .cut(.reset), .outage(nil),
            ])
        #expect(
            applied.map(\.what) == [
                ScenarioAction.outage(.blackhole).description, ScenarioAction.stall(.down).description,
                ScenarioAction.cut(.reset).description, ScenarioAction.outage(nil).description,
            ])
        #expect(clock.elapsed() == .seconds(8), "it slept to each moment, and no longer once all had happened")
    }

    @Test func aMarkFiresAtTheFirstLookAfterItIsReachedAndSaysWhatTriggeredIt() async {
        let clock = VirtualClock(), recorder = Recorder()
        // The origin finishes its first request at 1.234 s; the link has delivered 300 KB at 4 s.
        let applied = await self.driver(clock, recorder) { now in
            TimelineMarks(
                finished: now >= .milliseconds(1234) ? 1 : 0,
                finishedFor: now >= .milliseconds(1234) ? [.file("big.bin"): 1] : [:],
                delivered: now >= .seconds(4) ? 300_000 : 0)
        }.play([
            ScenarioEvent(trigger: .afterRequests(1, of: .file("big.bin")), action: .captive(open: false)),
            ScenarioEvent(trigger: .afterBytes(ByteCount(bytes: 300_000)), action: .cut(.reset)),
        ])
        // Looked at every 10 ms: the first look at or after each mark.
        #expect(applied.map(\.at) == [1.24, 4.0])
        #expect(
            applied[0].what.hasSuffix("(\(ScenarioTrigger.afterRequests(1, of: .file("big.bin"))))"),
            "\(applied[0].what)")
        #expect(
            applied[1].what.hasSuffix("(\(ScenarioTrigger.afterBytes(ByteCount(bytes: 300_000))))"),
            "\(applied[1].what)")
    }

    @Test func aNoteFromApplyingIsKept() async {
        let clock = VirtualClock(), recorder = Recorder()
        let applied = await self.driver(clock, recorder, note: "none of that name was in force").play([
            ScenarioEvent(trigger: .at(.seconds(1)), action: .removeFault(named: "slow"))
        ])
        #expect(
            applied.map(\.what) == [
                ScenarioAction.removeFault(named: "slow").description + " (none of that name was in force)"
            ])
    }

    @Test func anEmptyTimelineEndsAtOnceAndAsksForNothing() async {
        let clock = VirtualClock(), recorder = Recorder()
        let applied = await self.driver(clock, recorder) { _ in
            Issue.record("no mark is watched: none should be read")
            return TimelineMarks()
        }.play([])
        #expect(applied.isEmpty && clock.elapsed() == .zero)
    }
}
