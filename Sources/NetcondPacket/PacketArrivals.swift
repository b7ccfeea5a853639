import NetcondCore

/// When each packet reached the link, on the engine's clock.
///
/// netcond reads a packet some time after the kernel queued it: its thread's wake-up and the read
/// take 0.05-0.5 ms on a VM, and more on a loaded machine. Counted from the read, that time would
/// be added to every delay the link emulates (twice per round trip). The kernel stamps the packets
/// it receives (loopback's included) while a socket asks for receive stamps, and hands the stamp
/// over with packets queued on input: a packet with a stamp arrived then; one without (queued on
/// output) when it was read.
///
/// Stamps are on the wall clock (CLOCK_REALTIME), the engine on the monotonic one: each read takes
/// the offset between the two, read together. A step of the wall clock (an offset that moved more
/// than ``stepLimit`` since the last read, where a slew moves it microseconds) makes that read's
/// stamps unusable. A packet never arrives after its read, nor before the previous packet of its
/// direction (the link is first in, first out).
struct PacketArrivals {
    /// How far the wall clock's offset may move between two reads before it counts as a step.
    static let stepLimit: Int64 = 1_000_000

    private var last: [Instant] = [.zero, .zero]
    private var lastOffset: Int64

    /// `offset`: engine time minus wall-clock time, in nanoseconds, as the engine starts.
    init(offset: Int64) {
        self.lastOffset = offset
    }

    /// A read begins: `offset` is the engine's clock minus the wall clock now. Returns it when the
    /// stamps of this read can be trusted, nil after a step of the wall clock.
    mutating func read(offset: Int64) -> Int64? {
        defer { self.lastOffset = offset }
        return abs(offset - self.lastOffset) <= Self.stepLimit ? offset : nil
    }

    /// The arrival of a packet of `direction` (0 up, 1 down) read at `readAt`, with the kernel's
    /// `stamp` (wall-clock nanoseconds, 0 when none) and the read's `offset` (from ``read(offset:)``).
    mutating func arrival(direction: Int, stamp: Int64, readAt: Instant, offset: Int64?) -> Instant {
        var at = readAt
        if stamp > 0, let offset {
            let stamped = Instant(nanoseconds: stamp &+ offset)
            if stamped < readAt { at = stamped }
        }
        at = max(at, self.last[direction])
        self.last[direction] = at
        return at
    }
}
