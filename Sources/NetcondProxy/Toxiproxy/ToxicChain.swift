import NIOCore
import NetcondCore

/// One stream (upstream or downstream) of one connection, passed through that stream's toxics
/// as Toxiproxy passes it: a chain of stages in the order the toxics were added, each taking one
/// chunk at a time (as read from the socket, with the moment it was read) and handing it on.
///
/// ```
///   read ─▶ [stage 1] ─▶ [stage 2] ─▶ … ─▶ deliver (a write to the other side; `.end`: its close)
///            latency L±J:   a chunk goes on at (its moment + L ± J), never before the one ahead of it
///            bandwidth R:   a chunk of n bytes goes on n / R after the stage took it (R·100 ms at a time)
///            timeout T:     data is dropped; T without a chunk (T > 0) closes the stream
///            reset_peer T:  the first chunk (or end) is dropped, and T later the stream ends in a reset
///            limit_data N:  N bytes pass (an update keeps the count), then the stream ends
///            slow_close D:  the end goes on D after it came
///            slicer A±V, D: a chunk goes on in pieces near A bytes (halved until A + V at most), D µs apart
///            noop:          goes on as it came
/// ```
///
/// Each toxic is a value (``ToxicBehaviour``, one file each under `Toxics/`) that returns actions;
/// the chain carries them out: it keeps each stage's queue, timers and the writer's promise, and
/// counts the bytes the stages hold. A stage whose toxic did not draw this connection
/// (`toxicity`, drawn when the stage starts: the connection opens, the toxic is added or updated)
/// passes everything at once. Updating a toxic hands on what its stage held and starts it again;
/// removing one hands on what it held (a `timeout` closes the stream, as Toxiproxy 2.12 does). An
/// end (the reading side's EOF or close) travels behind the data before it. Lives on one event
/// loop; timers are that loop's.
final class ToxicChain {
    typealias Ending = ToxicEnding

    enum Item {
        case data(ByteBuffer, stamp: NIODeadline, promise: EventLoopPromise<Void>?)
        /// The stream is over: the reading side's end of stream (`eof`) passed on, or the side
        /// written to closed (`close`) or reset (`reset`) by a toxic or the connection's end.
        case end(Ending)

        var bytes: Int {
            if case .data(let buffer, _, _) = self { return buffer.readableBytes }
            return 0
        }

        var piece: ToxicPiece {
            switch self {
            case .data(let buffer, let stamp, _): return .data(buffer, stamp: stamp)
            case .end(let ending): return .end(ending)
            }
        }

        var promise: EventLoopPromise<Void>? {
            if case .data(_, _, let promise) = self { return promise }
            return nil
        }

        init(_ piece: ToxicPiece, promise: EventLoopPromise<Void>?) {
            switch piece {
            case .data(let buffer, let stamp): self = .data(buffer, stamp: stamp, promise: promise)
            case .end(let ending): self = .end(ending)
            }
        }
    }

    /// One toxic in the chain: its behaviour, and what the chain keeps for it.
    private final class Stage {
        var toxic: Toxic
        var applies: Bool
        var behaviour: any ToxicBehaviour
        var queue = CircularBuffer<Item>()
        /// The promise of the piece the behaviour holds (it goes with the last data it passes).
        var promise: EventLoopPromise<Void>?
        /// A `hold` or `pause` pending: the stage takes nothing new until it fires.
        var wait: Scheduled<Void>?
        var alarm: Scheduled<Void>?
        /// The stage has ended its output (a timeout, a limit, a reset, an end passed on): what
        /// reaches it is dropped.
        var closed = false

        init(toxic: Toxic, applies: Bool, behaviour: any ToxicBehaviour) {
            self.toxic = toxic
            self.applies = applies
            self.behaviour = behaviour
        }
    }

    let stream: Toxic.Stream
    private let eventLoop: EventLoop
    private let deliver: (Item) -> Void
    private var stages: [Stage] = []
    private var random: SeededRandom
    private let seed: UInt64
    private var draws: UInt64 = 0
    private var stopped = false
    /// Bytes the stages hold (queued or in hand).
    private(set) var heldBytes = 0
    /// Called when `heldBytes` is at `readLimit` or below after a delivery (the reading side may read again).
    var onRoom: (() -> Void)?
    /// The reading side reads while the chain holds no more than this.
    static let readLimit = 256 * 1024

    /// Under `--netcond-link` the link holds a `timeout`'s data (and its latency and rate are the
    /// link's): the stage only closes the stream once the time passes without data.
    private let onLink: Bool

    /// `seed`: the connection's, for its draws (toxicity, jitter, slice sizes).
    init(
        stream: Toxic.Stream, seed: UInt64, eventLoop: EventLoop, onLink: Bool = false,
        deliver: @escaping (Item) -> Void
    ) {
        self.stream = stream
        self.onLink = onLink
        self.eventLoop = eventLoop
        self.deliver = deliver
        self.seed = seed
        self.random = SeededRandom(seed: SeedDeriver.derive(seed, stream == .upstream ? 1 : 2))
    }

    /// A chunk read now (or the end of the stream) enters the chain.
    func push(_ item: Item) {
        guard !self.stopped else {
            item.promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        self.heldBytes += item.bytes
        self.enter(item, at: 0)
    }

    /// The toxics of this stream now, in the order they were added. A stage is kept for a toxic
    /// that has not changed, started again for one that changed, started for a new one, and taken
    /// out (handing on what it held) for one that is gone.
    func setToxics(_ toxics: [Toxic]) {
        guard !self.stopped else { return }
        let wanted = toxics.filter { toxic in
            guard toxic.stream == self.stream else { return false }
            switch toxic.kind {
            case .latency, .bandwidth: return !self.onLink
            default: return true
            }
        }
        let old = self.stages
        var next: [Stage] = []
        var started: [Stage] = []
        for toxic in wanted {
            if let stage = old.first(where: { Self.sameName($0.toxic.name, toxic.name) }) {
                if stage.toxic != toxic {
                    if self.interrupt(stage) {
                        stage.behaviour = toxic.kind.behaviour(replacing: stage.behaviour, onLink: self.onLink)
                    }
                    stage.toxic = toxic
                    stage.applies = self.draw(toxic)
                    started.append(stage)
                }
                next.append(stage)
            } else {
                let stage = Stage(
                    toxic: toxic, applies: self.draw(toxic), behaviour: toxic.kind.behaviour(onLink: self.onLink))
                next.append(stage)
                started.append(stage)
            }
        }
        let handOver = self.takeOut(old.filter { stage in !next.contains { $0 === stage } }, from: old, keeping: next)
        self.stages = next
        for stage in started where stage.applies && !stage.closed {
            self.run(stage.behaviour.start(now: self.eventLoop.now), at: stage)
        }
        // The stage nearest the output first: what it held is older than what the ones before it held.
        for (previous, items, closes) in handOver.reversed() {
            let position = previous.flatMap { p in next.firstIndex { $0 === p } }.map { $0 + 1 } ?? 0
            if closes {
                // Toxiproxy 2.12: taking a timeout away closes the stream it held.
                for item in items { self.drop(item) }
                self.enter(.end(.close), at: position)
            } else {
                for item in items { self.enter(item, at: position) }
            }
        }
        for stage in next { self.resume(stage) }
    }

    /// The stages taken away: what each held, to hand to the stage that followed it among those
    /// kept (the one kept before it, and so the position after that one).
    private func takeOut(_ removed: [Stage], from old: [Stage], keeping next: [Stage])
        -> [(after: Stage?, items: [Item], closes: Bool)]
    {
        var handOver: [(after: Stage?, items: [Item], closes: Bool)] = []
        for stage in removed {
            stage.alarm?.cancel()
            stage.alarm = nil
            guard let held = stage.behaviour.interrupt() else {
                // A reset under way goes ahead, as Toxiproxy's does (its wait cannot be cut short).
                for item in stage.queue { self.drop(item) }
                stage.queue.removeAll()
                continue
            }
            stage.wait?.cancel()
            stage.wait = nil
            var items = self.items(held, promise: stage.promise)
            stage.promise = nil
            items.append(contentsOf: stage.queue)
            stage.queue.removeAll()
            // On a netcond link the data a timeout held is delivered instead, as a network
            // delivers after an outage.
            let closes = stage.behaviour.closesWhenRemoved && !stage.closed
            stage.closed = true
            let index = old.firstIndex { $0 === stage }!
            let previous = old[..<index].reversed().first { kept in next.contains { $0 === kept } }
            handOver.append((previous, items, closes))
        }
        return handOver
    }

    /// Stops every timer; what the stages hold is dropped (the connection is gone: a write held
    /// fails, as a write to a closed channel does).
    func stop() {
        guard !self.stopped else { return }
        self.stopped = true
        for stage in self.stages {
            stage.wait?.cancel()
            stage.alarm?.cancel()
            stage.promise?.fail(ChannelError.ioOnClosedChannel)
            stage.promise = nil
            for item in stage.queue { item.promise?.fail(ChannelError.ioOnClosedChannel) }
            stage.queue.removeAll()
        }
        self.heldBytes = 0
        self.stages = []
    }

    // MARK: - Stages

    static func sameName(_ a: String, _ b: String) -> Bool {
        // Byte for byte, as Toxiproxy compares names (two spellings of é are two names).
        a.utf8.elementsEqual(b.utf8)
    }

    private func draw(_ toxic: Toxic) -> Bool {
        self.draws += 1
        guard toxic.toxicity < 1 else { return true }
        var random = SeededRandom(seed: SeedDeriver.derive(self.seed, self.stream == .upstream ? 1 : 2, self.draws))
        return random.chance(toxic.toxicity)
    }

    private func index(of stage: Stage) -> Int? {
        self.stages.firstIndex { $0 === stage }
    }

    private func enter(_ item: Item, at index: Int) {
        guard !self.stopped else { return self.drop(item) }
        guard index < self.stages.count else {
            self.heldBytes -= item.bytes
            self.deliver(item)
            if self.heldBytes <= Self.readLimit { self.onRoom?() }
            return
        }
        self.stages[index].queue.append(item)
        self.resume(self.stages[index])
    }

    private func drop(_ item: Item) {
        self.heldBytes -= item.bytes
        // A chunk a toxic drops was written, as far as its writer can tell.
        item.promise?.succeed()
    }

    /// The stage takes what waits for it, one item at a time, until it has to wait.
    private func resume(_ stage: Stage) {
        while !self.stopped, self.index(of: stage) != nil, stage.wait == nil, !stage.queue.isEmpty {
            self.take(stage.queue.removeFirst(), stage: stage)
        }
    }

    private func take(_ item: Item, stage: Stage) {
        if stage.closed { return self.drop(item) }
        guard stage.applies else { return self.handOn(item, from: stage) }
        stage.promise = item.promise
        self.run(stage.behaviour.take(item.piece, now: self.eventLoop.now, random: &self.random), at: stage)
    }

    private func handOn(_ item: Item, from stage: Stage) {
        if case .end = item { stage.closed = true }
        self.enter(item, at: (self.index(of: stage) ?? self.stages.count) + 1)
    }

    /// What `held` becomes, `promise` going with its last data.
    private func items(_ held: [ToxicPiece], promise: EventLoopPromise<Void>?) -> [Item] {
        let last = held.lastIndex { if case .data = $0 { return true } else { return false } }
        if last == nil { promise?.succeed() }
        return held.enumerated().map { Item($0.element, promise: $0.offset == last ? promise : nil) }
    }

    /// Carries out a toxic's actions, in order. A list with no `hold` finishes the piece the stage
    /// took: the writer's promise goes with its last data, or is kept at once when none passed.
    private func run(_ actions: [ToxicAction], at stage: Stage) {
        let finishes = !actions.contains { if case .hold = $0 { return true } else { return false } }
        var lastData: Int?
        if finishes {
            lastData = actions.lastIndex { if case .pass(.data) = $0 { return true } else { return false } }
            if lastData == nil { stage.promise?.succeed() }
        }
        let promise = stage.promise
        if finishes { stage.promise = nil }
        for (index, action) in actions.enumerated() {
            switch action {
            case .pass(let piece):
                self.handOn(Item(piece, promise: index == lastData ? promise : nil), from: stage)
            case .drop(let bytes):
                self.heldBytes -= bytes
            case .cut(let ending):
                for waiting in stage.queue { self.drop(waiting) }
                stage.queue.removeAll()
                self.handOn(.end(ending), from: stage)
            case .hold(let due), .pause(let due):
                stage.wait = self.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [weak self] in
                    guard let self, stage.wait != nil else { return }
                    stage.wait = nil
                    self.run(stage.behaviour.wake(now: self.eventLoop.now, random: &self.random), at: stage)
                    if stage.wait == nil { self.resume(stage) }
                }
            case .alarm(let due):
                stage.alarm?.cancel()
                stage.alarm = self.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [weak self] in
                    guard let self, !stage.closed else { return }
                    self.run(stage.behaviour.wake(now: self.eventLoop.now, random: &self.random), at: stage)
                }
            }
        }
    }

    /// A stage's wait is cut short by an update: what it held goes on now ("no data on the
    /// floor"), not through the stage again. False when the wait cannot be cut short (a reset
    /// under way, as in Toxiproxy), which then keeps its behaviour until it is done.
    private func interrupt(_ stage: Stage) -> Bool {
        stage.alarm?.cancel()
        stage.alarm = nil
        guard let held = stage.behaviour.interrupt() else { return false }
        stage.wait?.cancel()
        stage.wait = nil
        let items = self.items(held, promise: stage.promise)
        stage.promise = nil
        for item in items { self.handOn(item, from: stage) }
        return true
    }
}
