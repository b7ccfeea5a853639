import CNetcondPacket
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ncq_wait_spinning`: the packet engine's wait that polls (yielding the CPU) for a while after
/// a packet before it sleeps. What it must keep of `ncq_wait`: it returns what is ready, at once;
/// it never returns before its time-out with nothing ready; and its spin never outlasts the
/// time-out. Bounds on lateness are generous (a loaded CI machine), never on earliness.
@Suite struct EngineWaitTests {
    /// Two eventfds: one stands in for the queue's socket (never readable here), one is the wake.
    final class Descriptors {
        let queue = ncq_wake_open()
        let wake = ncq_wake_open()
        deinit {
            close(self.queue)
            close(self.wake)
        }
    }

    static func elapsed(_ body: () -> Int32) -> (Int32, Int64) {
        let start = ncq_now()
        let result = body()
        return (result, ncq_now() - start)
    }

    @Test func readyBeforeTheWaitReturnsAtOnceWithItsBit() throws {
        let fds = Descriptors()
        try #require(fds.queue >= 0 && fds.wake >= 0)
        ncq_wake(fds.wake)
        let (ready, took) = Self.elapsed { ncq_wait_spinning(fds.queue, fds.wake, 10_000_000_000, 20_000_000_000) }
        #expect(ready == 2)
        #expect(took < 5_000_000_000)
        // The wake's count was taken: nothing is ready any more.
        #expect(ncq_wait_spinning(fds.queue, fds.wake, 1_000_000, 0) == 0)
    }

    @Test func theQueueReadyIsTheFirstBit() throws {
        let fds = Descriptors()
        try #require(fds.queue >= 0 && fds.wake >= 0)
        ncq_wake(fds.queue)
        #expect(ncq_wait_spinning(fds.queue, fds.wake, 1_000_000, 1_000_000_000) & 1 == 1)
    }

    /// Waits (`spin`, `timeout`) while another thread wakes the wait `after` microseconds.
    static func waitWoken(after: UInt32, spin: Int64, timeout: Int64) throws -> (Int32, Int64) {
        let fds = Descriptors()
        try #require(fds.queue >= 0 && fds.wake >= 0)
        let wake = fds.wake
        let woken = DispatchSemaphore(value: 0)
        let waker = Thread {
            usleep(after)
            ncq_wake(wake)
            woken.signal()
        }
        waker.start()
        let result = Self.elapsed { ncq_wait_spinning(fds.queue, fds.wake, spin, timeout) }
        // The descriptors stay open until the waker has written.
        woken.wait()
        return result
    }

    @Test func somethingReadyDuringTheSpinEndsIt() throws {
        // A spin of 10 s, a time-out of 20 s: only seeing the wake while spinning ends it early.
        let (ready, took) = try Self.waitWoken(after: 5_000, spin: 10_000_000_000, timeout: 20_000_000_000)
        #expect(ready == 2)
        #expect(took >= 5_000_000)
        #expect(took < 9_000_000_000)
    }

    @Test func somethingReadyAfterTheSpinWakesTheSleep() throws {
        let (ready, took) = try Self.waitWoken(after: 50_000, spin: 1_000_000, timeout: 20_000_000_000)
        #expect(ready == 2)
        #expect(took >= 50_000_000)
        #expect(took < 10_000_000_000)
    }

    @Test func nothingReadyWaitsTheWholeTimeOutNeverLess() throws {
        let fds = Descriptors()
        try #require(fds.queue >= 0 && fds.wake >= 0)
        for (spin, timeout): (Int64, Int64) in [(2_000_000, 20_000_000), (0, 10_000_000), (5_000_000, 5_000_000)] {
            let (ready, took) = Self.elapsed { ncq_wait_spinning(fds.queue, fds.wake, spin, timeout) }
            #expect(ready == 0, "spin \(spin), timeout \(timeout)")
            #expect(took >= timeout, "spin \(spin), timeout \(timeout)")
        }
    }

    @Test func theSpinNeverOutlastsTheTimeOut() throws {
        let fds = Descriptors()
        try #require(fds.queue >= 0 && fds.wake >= 0)
        // A spin of 10 s cut to the 10 ms time-out (a factor of 500 allowed for a loaded machine).
        let (ready, took) = Self.elapsed { ncq_wait_spinning(fds.queue, fds.wake, 10_000_000_000, 10_000_000) }
        #expect(ready == 0)
        #expect(took >= 10_000_000)
        #expect(took < 5_000_000_000)
        // A time-out of 0 only polls.
        let (polled, pollTook) = Self.elapsed { ncq_wait_spinning(fds.queue, fds.wake, 10_000_000_000, 0) }
        #expect(polled == 0)
        #expect(pollTook < 5_000_000_000)
    }
}
