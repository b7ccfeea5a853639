import Testing

@testable import NetcondPacket

/// When the packet engine's thread sleeps: not while packets move or one is about to be due (a
/// wake-up from idle costs 0.1-0.5 ms on a VM), up to 50 ms on an idle link, and without polling
/// at all for a while once a poll came back late (a busy machine).
@Suite struct EngineWakeTests {
    static let us: Int64 = 1_000
    static let ms: Int64 = 1_000_000
    static let start: Int64 = 10_000 * ms

    @Test func anIdleLinkSleepsUpToFiftyMilliseconds() {
        let wake = EngineWake(precise: false)
        #expect(wake.timeout(at: Self.start, due: nil) == 50 * Self.ms)
        #expect(wake.timeout(at: Self.start, due: 200 * Self.ms) == 50 * Self.ms)
    }

    @Test func itWakesASpinWindowBeforeTheNextMomentAndThenPolls() {
        let wake = EngineWake(precise: false)
        #expect(wake.timeout(at: Self.start, due: 10 * Self.ms) == 10 * Self.ms - EngineWake.spinWindow)
        #expect(wake.timeout(at: Self.start, due: EngineWake.spinWindow) == 0)
        #expect(wake.timeout(at: Self.start, due: 0) == 0)
    }

    @Test func itStaysAwakeJustAfterAPacketMovedAndSleepsOnceThatPassed() {
        var wake = EngineWake(precise: false)
        wake.moved(at: Self.start)
        #expect(wake.timeout(at: Self.start, due: nil) == 0)
        #expect(wake.timeout(at: Self.start + EngineWake.awakeWindow - 1, due: 40 * Self.ms) == 0)
        #expect(wake.timeout(at: Self.start + EngineWake.awakeWindow, due: nil) == 50 * Self.ms)
    }

    @Test func aLatePollMeansABusyMachineAndSleepsUntilTheMomentForAWhile() {
        var wake = EngineWake(precise: false)
        wake.moved(at: Self.start)
        wake.polled(from: Self.start, to: Self.start + 20 * Self.us)
        #expect(wake.preemptions == 0)
        #expect(wake.timeout(at: Self.start + 20 * Self.us, due: nil) == 0)
        let late = Self.start + 200 * Self.us
        wake.polled(from: Self.start + 20 * Self.us, to: late)
        #expect(wake.preemptions == 1)
        wake.moved(at: late)
        // Busy: no polling after a packet moved, and a moment due is slept until exactly.
        #expect(wake.timeout(at: late, due: nil) == 50 * Self.ms)
        #expect(wake.timeout(at: late, due: 100 * Self.us) == 100 * Self.us)
        // Once the pause is over, polling again.
        let after = late + EngineWake.busyPause
        wake.moved(at: after)
        #expect(wake.timeout(at: after, due: nil) == 0)
    }

    @Test func lowLatencyPollsBeforeTheMomentEvenOnABusyMachine() {
        var wake = EngineWake(precise: true)
        wake.polled(from: Self.start, to: Self.start + Self.ms)
        #expect(wake.timeout(at: Self.start + Self.ms, due: 100 * Self.us) == 0)
        #expect(wake.timeout(at: Self.start + Self.ms, due: 10 * Self.ms) == 10 * Self.ms - EngineWake.spinWindow)
    }
}
