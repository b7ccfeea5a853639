import NIOCore
import NetcondCore

/// Runs a `LinkModel` on one event loop in real time.
///
/// Every connection of a run shares one driver (one access link), so every proxied channel lives
/// on the driver's event loop. Time enters here and only here: the loop's `now` relative to
/// the driver's epoch is the model's `now`. Deadlines are computed from the moment bytes were read,
/// never from when a timer fired, so timer lateness does not accumulate.
final class LinkDriver {
    let model: LinkModel
    let eventLoop: EventLoop
    private let epoch: NIODeadline
    private var endpoints: [FlowID: LinkEndpoint] = [:]
    private var timer: Scheduled<Void>?
    private var timerDeadline: Instant?
    private var dispatching = false
    private var needsAnotherPass = false
    /// How late each timer wake-up came after its deadline (netcond's own share of any delay).
    private(set) var timerLateness = LatenessHistogram()
    /// When set, a quiet link wakes this long before an isolated deadline (≥ 2 ms away) and spins
    /// to it (the loop has nothing else to do then): an epoll timer wake-up here is ~0.1 ms late at the median,
    /// which is a fifth of the latency budget of a round trip. A busy link (bytes read more often
    /// than every `quietGap` on average) wakes on time without spinning: there the loop is awake
    /// anyway, and a spin would hold up other connections.
    var spinWindow: Span = .zero
    static let quietGap: UInt64 = 10_000_000
    static let isolatedAfter = Span.milliseconds(2)
    private var lastActivity = NIODeadline.uptimeNanoseconds(0)
    /// Moving average of the time between reads (ns), weight 1/8.
    private var averageGap: UInt64 = 0

    /// `epoch`: the model's time zero, the run's start (default: now).
    init(profile: Profile, seed: UInt64, eventLoop: EventLoop, epoch: NIODeadline? = nil) {
        self.model = LinkModel(profile: profile, seed: seed)
        self.eventLoop = eventLoop
        self.epoch = epoch ?? eventLoop.now
    }

    /// The loop's clock (virtual on an `EmbeddedEventLoop`, so handler tests run in virtual time).
    var now: Instant { self.instant(self.eventLoop.now) }

    private func instant(_ deadline: NIODeadline) -> Instant {
        Instant(nanoseconds: Int64(deadline.uptimeNanoseconds) - Int64(self.epoch.uptimeNanoseconds))
    }

    /// The one-way delay in force now (a step series' row of the moment; the latency otherwise).
    func delay(_ direction: Direction) -> Span {
        self.model.conditions.direction(direction).delay(at: self.now)
    }

    /// A round trip that leaves at `moment` (default: now), in the delays in force then.
    func roundTrip(from moment: Instant? = nil) -> Span {
        self.model.conditions.roundTrip(from: moment ?? self.now)
    }

    func deadline(for instant: Instant) -> NIODeadline {
        NIODeadline.uptimeNanoseconds(self.epoch.uptimeNanoseconds + UInt64(max(0, instant.nanoseconds)))
    }

    func open(_ endpoint: LinkEndpoint) -> FlowID {
        let flow = self.model.openFlow(at: self.now)
        self.endpoints[flow] = endpoint
        return flow
    }

    /// Emulates the set-up of a new upstream connection on this flow (see `LinkModel.connect`);
    /// `handshakeUnderWay` runs when the first SYN that reaches the server leaves (never for an
    /// attempt that is refused or blackholed), `completion` when the emulated handshake is done,
    /// refused, or has timed out.
    func connect(
        _ flow: FlowID,
        host: String,
        port: Int,
        resolvesName: Bool,
        intercept: SetupVerdict?,
        handshakeUnderWay: @escaping () -> Void,
        completion: @escaping (ConnectOutcome) -> Void
    ) {
        self.connectWaiters[flow] = completion
        self.handshakeWaiters[flow] = handshakeUnderWay
        self.model.connect(flow, at: self.now, host: host, port: port, resolvesName: resolvesName, intercept: intercept)
        self.pump()
    }

    func close(_ flow: FlowID) {
        self.endpoints.removeValue(forKey: flow)
        self.waitingForRoom.removeValue(forKey: flow)
        self.connectWaiters.removeValue(forKey: flow)
        self.handshakeWaiters.removeValue(forKey: flow)
        self.model.closeFlow(flow)
    }

    /// Called whenever the link's state changes (schedule phase, outage, stall), with the new state.
    var onStateChange: ((LinkState, Instant) -> Void)?

    private var connectWaiters: [FlowID: (ConnectOutcome) -> Void] = [:]
    private var handshakeWaiters: [FlowID: () -> Void] = [:]

    // MARK: Live control

    func switchProfile(to profile: Profile) {
        self.model.switchProfile(to: profile, at: self.now)
        self.pump()
    }

    func setOutage(_ outage: OutageBehaviour?) {
        self.model.setOutage(outage, at: self.now)
        self.pump()
    }

    func setStall(_ stall: StallDirection?) {
        self.model.setStall(stall, at: self.now)
        self.pump()
    }

    /// Changes the route called `name` (nothing when there is none).
    func changeRoute(named name: String, _ change: RouteChange) {
        guard let route = self.model.routeIndex(named: name) else { return }
        self.model.change(route: route, change, at: self.now)
        self.pump()
    }

    /// Each route in force as it stands now.
    func routeStatuses() -> [ControlRoute] {
        self.model.routePaths.map {
            ControlRoute(self.model.routeView($0), connections: self.model.routeConnections[$0] ?? 0)
        }
    }

    /// A handover (``LinkModel/handover(to:gap:at:)``); returns how many connections it stranded.
    func handover(to profile: Profile, gap: Span) -> Int {
        let count = self.model.handover(to: profile, gap: gap, at: self.now)
        self.pump()
        return count
    }

    /// Cuts every connection open now; returns how many.
    @discardableResult
    func cutConnections(_ mode: CutMode) -> Int {
        let count = self.model.cutConnections(mode, at: self.now)
        self.pump()
        return count
    }

    /// Endpoints whose sender buffer was full: told after every pump, since room appears when the
    /// model sends (an acknowledgement), not only when it delivers.
    private var waitingForRoom: [FlowID: LinkEndpoint] = [:]

    func notifyWhenRoom(_ flow: FlowID) {
        self.waitingForRoom[flow] = self.endpoints[flow]
    }

    func stopWaitingForRoom(_ flow: FlowID) {
        self.waitingForRoom.removeValue(forKey: flow)
    }

    func send(_ flow: FlowID, _ direction: Direction, bytes: Int) {
        let now = self.eventLoop.now
        let gap = now.uptimeNanoseconds &- self.lastActivity.uptimeNanoseconds
        self.averageGap = self.averageGap - self.averageGap / 8 + min(gap, 1_000_000_000) / 8
        self.lastActivity = now
        let instant = self.instant(now)
        self.model.send(flow, direction, bytes: bytes, at: instant)
        self.pump(at: instant)
    }

    /// Delivers whatever is due and sets the timer for what comes next.
    func pump() {
        self.pump(at: self.now)
    }

    /// `pump()` with the clock already read by the caller: one reading per entry, and a fresh one
    /// only when delivering made more work due.
    private func pump(at start: Instant) {
        if self.dispatching {
            self.needsAnotherPass = true
            return
        }
        self.dispatching = true
        defer { self.dispatching = false }
        var now = start
        repeat {
            if self.needsAnotherPass { now = self.now }
            self.needsAnotherPass = false
            let deliveries = self.model.advance(to: now)
            for delivery in deliveries {
                self.endpoints[delivery.flow]?.deliver(delivery.direction, bytes: delivery.bytes)
            }
            for notice in self.model.takeNotices() {
                self.handle(notice)
            }
            if !self.waitingForRoom.isEmpty {
                for flow in self.waitingForRoom.keys.sorted() {
                    self.waitingForRoom[flow]?.roomMayHaveChanged()
                }
            }
        } while self.needsAnotherPass
        self.armTimer(now: now)
    }

    private func handle(_ notice: LinkNotice) {
        switch notice {
        case .handshakeUnderWay(let flow, _):
            self.handshakeWaiters.removeValue(forKey: flow)?()
        case .connected(let flow, let outcome):
            self.handshakeWaiters.removeValue(forKey: flow)
            self.connectWaiters.removeValue(forKey: flow)?(outcome)
        case .cut(let flow, let mode, let at):
            self.waitingForRoom.removeValue(forKey: flow)
            self.handshakeWaiters.removeValue(forKey: flow)
            if let waiter = self.connectWaiters.removeValue(forKey: flow) {
                waiter(.refused(at: at))
            }
            self.endpoints.removeValue(forKey: flow)?.linkCut(mode)
        case .stateChanged(let state, let at):
            self.onStateChange?(state, at)
        }
    }

    private func armTimer(now: Instant) {
        guard let next = self.model.nextEventTime else {
            self.timer?.cancel()
            self.timer = nil
            self.timerDeadline = nil
            return
        }
        if let current = self.timerDeadline, current <= next, self.timer != nil { return }
        self.timer?.cancel()
        // Spin only for an isolated deadline on a quiet link: with deadlines close together (a
        // busy link serialising segments) the loop is awake anyway and a spin would starve its I/O.
        let isolated = next - now > Self.isolatedAfter
        self.arm(next, early: isolated && self.averageGap > Self.quietGap ? self.spinWindow : .zero)
    }

    private func arm(_ next: Instant, early: Span) {
        self.timerDeadline = next
        let due = self.deadline(for: next)
        let wake = early > .zero ? due - TimeAmount.nanoseconds(early.nanoseconds) : due
        self.timer = self.eventLoop.assumeIsolated().scheduleTask(deadline: wake) {
            self.timer = nil
            self.timerDeadline = nil
            if early > .zero {
                // The link is quiet: spin the last stretch (at most `spinWindow`).
                while NIODeadline.now() < due {}
            }
            let now = self.now
            self.timerLateness.record(now - next)
            self.pump(at: now)
        }
    }
}

/// Something that receives the bytes the link delivers for one connection.
protocol LinkEndpoint: AnyObject {
    func deliver(_ direction: Direction, bytes: Int)
    /// The model may have taken bytes from a full sender buffer.
    func roomMayHaveChanged()
    /// The link cut the connection (a `reset` outage, a cut): drop what is held, then reset or
    /// close the socket.
    func linkCut(_ mode: CutMode)
}
