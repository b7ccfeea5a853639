@testable import NetcondCore

/// Drives a `LinkModel` in virtual time the way the proxy does, for tests.
struct LinkSimulation {
    let model: LinkModel
    var deliveries: [Delivery] = []
    /// Every notice the model gave, in order (connection outcomes, resets, state changes).
    var notices: [LinkNotice] = []

    init(_ profile: Profile, seed: UInt64 = 1) {
        self.model = LinkModel(profile: profile, seed: seed)
    }

    /// Runs until the link is idle or `deadline` passes.
    mutating func run(until deadline: Instant) {
        while let next = self.model.nextEventTime, next <= deadline {
            self.deliveries += self.model.advance(to: next)
            self.notices += self.model.takeNotices()
        }
        self.deliveries += self.model.advance(to: deadline)
        self.notices += self.model.takeNotices()
    }

    /// Starts a connection's set-up at `time` and runs until its outcome (nil if none by `deadline`).
    mutating func connect(
        _ flow: FlowID,
        at time: Instant,
        host: String = "",
        port: Int = 80,
        resolvesName: Bool = false,
        deadline: Instant = .s(1000)
    ) -> ConnectOutcome? {
        self.model.connect(flow, at: time, host: host, port: port, resolvesName: resolvesName)
        while true {
            self.notices += self.model.takeNotices()
            for case .connected(flow, let outcome) in self.notices { return outcome }
            guard let next = self.model.nextEventTime, next <= deadline else { return nil }
            self.deliveries += self.model.advance(to: next)
        }
    }

    /// The state changes the model reported, in order.
    var stateChanges: [(LinkState, Instant)] {
        self.notices.compactMap { notice in
            if case .stateChanged(let state, let at) = notice { return (state, at) }
            return nil
        }
    }

    /// Bytes delivered on a flow and direction by `time`.
    func delivered(_ flow: FlowID, _ direction: Direction, by time: Instant = Instant(nanoseconds: .max)) -> Int {
        self.deliveries.filter { $0.flow == flow && $0.direction == direction && $0.at <= time }.reduce(0) {
            $0 + $1.bytes
        }
    }

    /// A bulk transfer: the application keeps the sender's buffer topped up to `buffer` bytes until
    /// `total` bytes were written, as a program writing to a socket does. Returns when the last byte
    /// was delivered (nil if it was not before `deadline`).
    mutating func bulk(
        _ flow: FlowID,
        _ direction: Direction,
        total: Int,
        from start: Instant,
        buffer: Int = 256 * 1024,
        deadline: Instant
    ) -> Instant? {
        var written = 0
        var now = start
        var received = 0
        while now <= deadline {
            let room = buffer - self.model.unsent(flow, direction)
            if room > 0 && written < total {
                let chunk = min(room, total - written)
                self.model.send(flow, direction, bytes: chunk, at: now)
                written += chunk
            }
            let batch = self.model.advance(to: now)
            self.deliveries += batch
            for delivery in batch where delivery.flow == flow && delivery.direction == direction {
                received += delivery.bytes
                if received >= total { return delivery.at }
            }
            guard let next = self.model.nextEventTime else { return nil }
            now = next
        }
        return nil
    }
}

extension Instant {
    static func ms(_ milliseconds: Int64) -> Instant { Instant(nanoseconds: milliseconds * 1_000_000) }
    static func s(_ seconds: Double) -> Instant { Instant(nanoseconds: Int64(seconds * 1e9)) }
}

extension Profile {
    /// A symmetric test profile.
    static func test(
        latency: Span = .zero,
        bandwidth: Bandwidth? = nil,
        loss: Double = 0,
        queue: ByteCount = LinkDirection.defaultQueue,
        jitter: Span = .zero,
        tcp: CongestionControl = .cubic
    ) -> Profile {
        let direction = LinkDirection(
            latency: latency,
            jitter: jitter,
            bandwidth: bandwidth,
            queue: queue,
            loss: loss > 0 ? .bernoulli(Probability(loss)) : .none
        )
        return Profile(name: "test", up: direction, down: direction, tcp: tcp)
    }
}
