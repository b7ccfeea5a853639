import NIOCore
import NetcondCore

/// Every decision of ``LinkShaper``, as a value: whether bytes cross the emulated link or skip it,
/// when the client is read, when the proxy may read the server, and when a half-close or a close
/// the proxy asked for is carried out. It holds no bytes, no channel and no clock: the shaper
/// passes what it knows (what it holds, whether the emulated sender has room, the time) and
/// carries out the actions returned.
///
/// ```
///  passive ──beginShaping──▶ shaping ──linkCut / removed──▶ done
///     bytes skip the link      bytes cross it (or skip it while the link is transparent and
///                              nothing of their direction is held)
///  a close asked for:  waits for the down bytes before it, and (the far end's) for the one-way latency
///  the client's FIN:   waits for the up bytes before it; dropped with them when the client left
///                      before anything of its connection got through
/// ```
struct LinkShaperState {
    enum Action: Equatable {
        /// Read the client.
        case read
        /// Ask the driver to say when the emulated sender has room again.
        case waitForRoom
        case stopWaitingForRoom
        /// Tell the proxy it may (not) read the server now.
        case linkWritable(Bool)
        /// Pass the client's FIN on (every byte before it has crossed the link).
        case fireInputClosed
        /// Carry out the half-closes held until the down bytes before them were delivered.
        case closeHeldOutputs
        /// Close the client's connection now, with a reset or a FIN.
        case close(reset: Bool)
        /// Look again at the pending close at this moment.
        case armCloseTimer(NIODeadline)
        /// Drop what the client sent and close: it left before its connection got through.
        case dropHeldUpAndClose
    }

    /// Where bytes go.
    enum Route: Equatable {
        /// Straight on, without the link.
        case bypass
        /// Held and sent into the link.
        case link
    }

    /// Bytes cross the link (a flow is open and shaping has begun).
    private(set) var shaping = false
    /// When shaping began (the client's connection, as far as the emulated link knows).
    private var shapingSince: NIODeadline?
    /// No byte of the client's has crossed the link yet.
    private var nothingDeliveredUp = true
    private var inputClosedPending = false
    /// A full close waiting for the bytes before it (and, when the far end made it, for the
    /// link's one-way latency): how, and not before when.
    private var pendingClose: (reset: Bool, notBefore: NIODeadline)?
    private var closeTimerArmed = false
    private var readPending = false
    private var linkWritable = true
    /// Bytes were passed on without the link since the last read-complete / flush.
    private var readBypassed = false
    private var writeBypassed = false

    mutating func beginShaping(at now: NIODeadline) {
        self.shaping = true
        self.shapingSince = now
    }

    /// The link cut the connection, or the shaper left the pipeline: nothing crosses it any more.
    mutating func stopShaping() {
        self.shaping = false
    }

    // MARK: Up: client → server

    /// Bytes read from the client: they skip the link when there is none, or while it is
    /// transparent and nothing of the client's is held in it (bytes behind held ones follow them).
    mutating func bytesRead(upHeld: Bool, transparent: Bool) -> Route {
        guard self.shaping, !(transparent && !upHeld) else {
            self.readBypassed = true
            return .bypass
        }
        return .link
    }

    /// Whether the read's end goes on now (held bytes end their reads when they are delivered).
    mutating func readComplete() -> Bool {
        guard !self.shaping || self.readBypassed else { return false }
        self.readBypassed = false
        return true
    }

    /// Whether the client may be read now (`senderHasRoom`: the emulated sender's buffer up).
    mutating func read(senderHasRoom: Bool) -> [Action] {
        guard self.shaping, !senderHasRoom else { return [.read] }
        self.readPending = true
        return [.waitForRoom]
    }

    /// The client's FIN at `now`. `setUp`: how long the connection's set-up takes at least.
    mutating func inputClosed(upHeld: Bool, setUp: Span, at now: NIODeadline) -> [Action] {
        guard self.shaping, upHeld else { return [.fireInputClosed] }
        if self.nothingDeliveredUp, let since = self.shapingSince, now >= since + .nanoseconds(setUp.nanoseconds) {
            // The client gave up on a connection none of whose bytes has got through (a
            // blackhole, a stall): on a network its connection was never made, and nothing of it
            // reaches a server after it has gone. (A FIN sooner than the set-up could have taken
            // is a client half-closing after its request, which goes on.)
            return [.dropHeldUpAndClose]
        }
        self.inputClosedPending = true
        return []
    }

    /// Up bytes crossed the link; `upHeld`: whether some are still held.
    mutating func deliveredUp(upHeld: Bool) -> [Action] {
        self.nothingDeliveredUp = false
        guard !upHeld, self.inputClosedPending else { return [] }
        self.inputClosedPending = false
        return [.fireInputClosed]
    }

    // MARK: Down: server → client

    /// Bytes the proxy writes to the client (as ``bytesRead(upHeld:transparent:)``).
    mutating func bytesWritten(downHeld: Bool, transparent: Bool) -> Route {
        guard self.shaping, !(transparent && !downHeld) else {
            self.writeBypassed = true
            return .bypass
        }
        return .link
    }

    /// Down bytes were handed to the link; `senderHasRoom`: whether its sender can take more.
    mutating func heldDown(senderHasRoom: Bool) -> [Action] {
        guard self.linkWritable, !senderHasRoom else { return [] }
        self.linkWritable = false
        return [.waitForRoom, .linkWritable(false)]
    }

    /// Whether a flush goes on now (held bytes are flushed when they are delivered).
    mutating func flush() -> Bool {
        guard !self.shaping || self.writeBypassed else { return false }
        self.writeBypassed = false
        return true
    }

    /// Whether a half-close waits for the down bytes before it.
    func holdsOutputClose(downHeld: Bool) -> Bool {
        self.shaping && downHeld
    }

    /// Down bytes crossed the link; `downHeld`: whether some are still held.
    mutating func deliveredDown(downHeld: Bool, at now: NIODeadline) -> [Action] {
        guard !downHeld else { return [] }
        return [.closeHeldOutputs] + self.closeIfDue(downHeld: false, at: now)
    }

    /// The emulated sender's buffers may have room again (`up`, `down`: whether they have).
    mutating func roomMayHaveChanged(up: Bool, down: Bool) -> [Action] {
        guard self.shaping else { return [] }
        var actions: [Action] = []
        if self.readPending && up {
            self.readPending = false
            actions.append(.read)
        }
        if !self.linkWritable && down {
            self.linkWritable = true
            actions.append(.linkWritable(true))
        }
        if !self.readPending && self.linkWritable { actions.append(.stopWaitingForRoom) }
        return actions
    }

    // MARK: Closing

    /// The proxy asks to close the client's connection once what it wrote before has crossed the
    /// link. `downLatency`: the one-way latency down, which a close of the far end's waits too.
    mutating func closeRequested(_ close: CloseWhenDrained, downLatency: Span, downHeld: Bool, at now: NIODeadline)
        -> [Action]
    {
        var notBefore = now
        if close.crossesLink, self.shaping {
            // The far end's FIN or RST is a segment like any other: it takes the one-way latency.
            notBefore = notBefore + .nanoseconds(downLatency.nanoseconds)
        }
        // A reset asked for once stays a reset (an error is often followed by the close it causes).
        let earlier = self.pendingClose
        self.pendingClose = (close.reset || (earlier?.reset ?? false), max(notBefore, earlier?.notBefore ?? notBefore))
        return self.closeIfDue(downHeld: downHeld, at: now)
    }

    /// The close timer fired.
    mutating func closeTimerFired(downHeld: Bool, at now: NIODeadline) -> [Action] {
        self.closeTimerArmed = false
        return self.closeIfDue(downHeld: downHeld, at: now)
    }

    /// A pending close is made once every byte before it has been delivered and its moment has
    /// come; otherwise it waits for the one (a delivery) or the other (a timer).
    private mutating func closeIfDue(downHeld: Bool, at now: NIODeadline) -> [Action] {
        guard let (reset, notBefore) = self.pendingClose, !self.shaping || !downHeld else { return [] }
        if now < notBefore {
            guard !self.closeTimerArmed else { return [] }
            self.closeTimerArmed = true
            return [.armCloseTimer(notBefore)]
        }
        self.pendingClose = nil
        self.closeTimerArmed = false
        return [.close(reset: reset)]
    }
}
