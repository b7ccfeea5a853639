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

    init(profile: Profile, seed: UInt64, eventLoop: EventLoop) {
        self.model = LinkModel(profile: profile, seed: seed)
        self.eventLoop = eventLoop
        self.epoch = eventLoop.now
    }

    /// The loop's clock (virtual on an `EmbeddedEventLoop`, so handler tests run in virtual time).
    var now: Instant {
        Instant(nanoseconds: Int64(self.eventLoop.now.uptimeNanoseconds) - Int64(self.epoch.uptimeNanoseconds))
    }

    func deadline(for instant: Instant) -> NIODeadline {
        NIODeadline.uptimeNanoseconds(self.epoch.uptimeNanoseconds + UInt64(max(0, instant.nanoseconds)))
    }

    func open(_ endpoint: LinkEndpoint) -> FlowID {
        let flow = self.model.openFlow(at: self.now)
        self.endpoints[flow] = endpoint
        return flow
    }

    /// Emulates the set-up of a new upstream connection on this flow (see `LinkModel.connect`).
    func connect(_ flow: FlowID, resolvesName: Bool) -> ConnectOutcome {
        let outcome = self.model.connect(flow, at: self.now, resolvesName: resolvesName)
        self.pump()
        return outcome
    }

    func close(_ flow: FlowID) {
        self.endpoints.removeValue(forKey: flow)
        self.waitingForRoom.removeValue(forKey: flow)
        self.model.closeFlow(flow)
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
        self.model.send(flow, direction, bytes: bytes, at: self.now)
        self.pump()
    }

    /// Delivers whatever is due and sets the timer for what comes next.
    func pump() {
        if self.dispatching {
            self.needsAnotherPass = true
            return
        }
        self.dispatching = true
        defer { self.dispatching = false }
        repeat {
            self.needsAnotherPass = false
            let deliveries = self.model.advance(to: self.now)
            for delivery in deliveries {
                self.endpoints[delivery.flow]?.deliver(delivery.direction, bytes: delivery.bytes)
            }
            if !self.waitingForRoom.isEmpty {
                for flow in self.waitingForRoom.keys.sorted() {
                    self.waitingForRoom[flow]?.roomMayHaveChanged()
                }
            }
        } while self.needsAnotherPass
        self.armTimer()
    }

    private func armTimer() {
        guard let next = self.model.nextEventTime else {
            self.timer?.cancel()
            self.timer = nil
            self.timerDeadline = nil
            return
        }
        if let current = self.timerDeadline, current <= next, self.timer != nil { return }
        self.timer?.cancel()
        self.timerDeadline = next
        self.timer = self.eventLoop.assumeIsolated().scheduleTask(deadline: self.deadline(for: next)) {
            self.timer = nil
            self.timerDeadline = nil
            self.pump()
        }
    }
}

/// Something that receives the bytes the link delivers for one connection.
protocol LinkEndpoint: AnyObject {
    func deliver(_ direction: Direction, bytes: Int)
    /// The model may have taken bytes from a full sender buffer.
    func roomMayHaveChanged()
}
