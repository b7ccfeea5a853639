/// When the packet engine's thread sleeps, and when it polls instead.
///
/// A thread asleep in `ppoll` that a packet wakes pays the CPU's exit from idle: 0.1-0.5 ms on a
/// virtual machine or a laptop, twice per round trip through the link (the packet out, the answer
/// back). So the thread does not sleep
/// - for ``awakeWindow`` after a packet last moved (read from the queue, or let go): the answer to a
///   packet just let go (a server's reply, the client's next segment) usually comes within tens of
///   microseconds and is read at once;
/// - in the last ``spinWindow`` before a packet is due (a timer's wake-up from idle comes as late).
///
/// Polling only pays while the CPUs are otherwise idle. On a busy machine they are awake anyway,
/// and a polling thread takes time from the programs it carries packets for: a poll that came back
/// late (``preemptedAfter``: the thread was off the CPU) turns polling off for ``busyPause``, except
/// before a moment due under `--low-latency` (``precise``). An idle link sleeps up to 50 ms at a time.
struct EngineWake {
    static let awakeWindow: Int64 = 250_000
    static let spinWindow: Int64 = 300_000
    static let preemptedAfter: Int64 = 50_000
    static let busyPause: Int64 = 100_000_000
    static let longestSleep: Int64 = 50_000_000

    /// `--low-latency`: poll before a moment due even when the machine is busy.
    let precise: Bool
    /// When a packet last moved (engine nanoseconds).
    private(set) var lastMoved = Int64.min / 2
    /// Until when the machine counts as busy (no polling).
    private(set) var busyUntil = Int64.min / 2
    /// Polls that came back late, for the run's summary.
    private(set) var preemptions = 0

    init(precise: Bool) { self.precise = precise }

    mutating func moved(at now: Int64) { self.lastMoved = now }

    /// How long to sleep at `now` with the next moment `due` nanoseconds away (nil: nothing due);
    /// 0 polls.
    func timeout(at now: Int64, due: Int64?) -> Int64 {
        let polling = now >= self.busyUntil
        if polling && now - self.lastMoved < Self.awakeWindow { return 0 }
        guard let due else { return Self.longestSleep }
        guard polling || self.precise else { return min(Self.longestSleep, due) }
        return due <= Self.spinWindow ? 0 : min(Self.longestSleep, due - Self.spinWindow)
    }

    /// A poll (timeout 0) started at `start` came back at `end`.
    mutating func polled(from start: Int64, to end: Int64) {
        guard end - start > Self.preemptedAfter else { return }
        self.busyUntil = end + Self.busyPause
        self.preemptions += 1
    }
}
