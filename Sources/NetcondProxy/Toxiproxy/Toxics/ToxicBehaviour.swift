import NIOCore
import NetcondCore

/// How a stream ends: the reading side's end of stream passed on (`eof`), or the side written to
/// closed (`close`) or reset (`reset`) by a toxic or the connection's end.
enum ToxicEnding: Equatable, Sendable {
    case eof
    case close
    case reset
}

/// What a toxic takes and hands on: a chunk as read (with the moment it counts from, so that
/// latencies never double-count) or the end of the stream.
enum ToxicPiece: Equatable {
    case data(ByteBuffer, stamp: NIODeadline)
    case end(ToxicEnding)

    var bytes: Int {
        if case .data(let buffer, _) = self { return buffer.readableBytes }
        return 0
    }
}

/// What a toxic asks of its stream, in order. The toxic never reads a clock and never holds a
/// timer: `now` comes in, and a wait or an alarm goes out for the driver (``ToxicChain``) to keep.
enum ToxicAction: Equatable {
    /// The piece goes on now, to the next toxic (or out of the chain).
    case pass(ToxicPiece)
    /// `bytes` are dropped on purpose (counted by the chain).
    case drop(bytes: Int)
    /// What waits for this toxic is dropped, and the stream ends now with `ending`.
    case cut(ToxicEnding)
    /// The toxic holds (part of) the piece it took, and takes nothing new until `until`; then it
    /// is woken (`wake`).
    case hold(until: NIODeadline)
    /// The piece taken is done with, but the toxic takes nothing new until `until`; then it is woken.
    case pause(until: NIODeadline)
    /// The toxic is woken at `at` whatever else happens (a clock that does not hold the stream
    /// up: `timeout`'s); a later alarm replaces it.
    case alarm(at: NIODeadline)
}

/// One toxic on one stream of one connection: its settings and its state for that stream. A pure
/// value: it takes one piece at a time and returns what to do; ``ToxicChain`` carries it out on
/// the connection's event loop, and a test in virtual time with a plain `NIODeadline`.
///
/// The chain hands a toxic the next piece only when it is not holding or pausing. A piece the
/// toxic takes is finished with once it returns no `hold`: the writer's promise goes with the
/// last data it passed (or is kept, when it passed none).
protocol ToxicBehaviour {
    /// The stream's toxic starts (the connection opens, or the toxic is added or changed) at `now`.
    mutating func start(now: NIODeadline) -> [ToxicAction]
    /// Takes `piece` at `now`.
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction]
    /// The wait (`hold`, `pause`) or the `alarm` asked for is due at `now`.
    mutating func wake(now: NIODeadline, random: inout SeededRandom) -> [ToxicAction]
    /// An update or a removal cuts the wait short: what the toxic held, to go on as it is ("no data
    /// on the floor"); nil when its wait cannot be cut short (as Toxiproxy's reset cannot).
    mutating func interrupt() -> [ToxicPiece]?
    /// Taking the toxic away ends the stream it held (Toxiproxy 2.12's `timeout`).
    var closesWhenRemoved: Bool { get }
}

extension ToxicBehaviour {
    mutating func start(now: NIODeadline) -> [ToxicAction] { [] }
    mutating func wake(now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] { [] }
    mutating func interrupt() -> [ToxicPiece]? { [] }
    var closesWhenRemoved: Bool { false }
}

/// A toxic that holds at most one piece while it waits (`latency`'s chunk, `slow_close`'s end):
/// waking passes it on; an update or a removal hands it over as it is.
protocol HoldsOnePiece: ToxicBehaviour {
    var held: ToxicPiece? { get set }
}

extension HoldsOnePiece {
    mutating func wake(now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        defer { self.held = nil }
        return self.held.map { [.pass($0)] } ?? []
    }

    mutating func interrupt() -> [ToxicPiece]? {
        defer { self.held = nil }
        return self.held.map { [$0] } ?? []
    }
}

extension Toxic.Kind {
    /// This kind's behaviour on one stream, fresh; `old` (the same toxic before an update) hands
    /// over what outlives an update (`limit_data`'s count). `onLink`: under `--netcond-link`.
    func behaviour(replacing old: (any ToxicBehaviour)? = nil, onLink: Bool) -> any ToxicBehaviour {
        switch self {
        case .latency(let latency, let jitter):
            return LatencyToxic(latency: .milliseconds(latency), jitter: .milliseconds(jitter))
        case .bandwidth(let rate):
            return BandwidthToxic(rate: rate)
        case .timeout(let timeout):
            return TimeoutToxic(timeout: .milliseconds(timeout), onLink: onLink)
        case .resetPeer(let timeout):
            return ResetPeerToxic(timeout: .milliseconds(timeout))
        case .limitData(let bytes):
            return LimitDataToxic(limit: bytes, passed: (old as? LimitDataToxic)?.passed ?? 0)
        case .slowClose(let delay):
            return SlowCloseToxic(delay: .milliseconds(delay))
        case .slicer(let averageSize, let sizeVariation, let delay):
            return SlicerToxic(
                averageSize: Int(averageSize), sizeVariation: Int(sizeVariation), delay: .microseconds(delay))
        case .noop:
            return NoopToxic()
        }
    }
}
