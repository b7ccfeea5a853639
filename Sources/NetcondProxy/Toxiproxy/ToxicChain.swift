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
/// A stage whose toxic did not draw this connection (`toxicity`, drawn when the stage starts: the
/// connection opens, the toxic is added or updated) passes everything at once. Updating a toxic
/// hands on what its stage held and starts it again; removing one hands on what it held (a
/// `timeout` closes the stream, as Toxiproxy 2.12 does). An end (the reading side's EOF or close)
/// travels behind the data before it. Lives on one event loop; timers are that loop's.
final class ToxicChain {
    enum Item {
        case data(ByteBuffer, stamp: NIODeadline, promise: EventLoopPromise<Void>?)
        /// The stream is over: the reading side's end of stream (`eof`) passed on, or the side
        /// written to closed (`close`) or reset (`reset`) by a toxic or the connection's end.
        case end(Ending)

        var bytes: Int {
            if case .data(let buffer, _, _) = self { return buffer.readableBytes }
            return 0
        }
    }

    private final class Stage {
        var toxic: Toxic
        var applies: Bool
        var queue = CircularBuffer<Item>()
        /// What the stage holds while it waits (a chunk's latency or bandwidth, a slicer's rest).
        var inHand: Item?
        /// A timer is pending: the stage takes nothing new until it fires.
        var waiting = false
        var timer: Scheduled<Void>?
        /// `timeout`'s clock: restarted by each chunk.
        var idle: Scheduled<Void>?
        /// The stage has ended its output (a timeout, a limit, a reset, an end passed on): what
        /// reaches it is dropped.
        var closed = false
        /// `bandwidth`'s sleep owed (ns; below 0: a timer that fired late is made up).
        var owed: Int64 = 0
        /// `limit_data`'s bytes passed so far (kept across updates).
        var passed: Int64 = 0
        /// `reset_peer` has taken its chunk and waits to reset (not cut short by an update).
        var resetting = false

        init(toxic: Toxic, applies: Bool) {
            self.toxic = toxic
            self.applies = applies
        }
    }

    enum Ending: Equatable {
        case eof
        case close
        case reset
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
    init(stream: Toxic.Stream, seed: UInt64, eventLoop: EventLoop, onLink: Bool = false, deliver: @escaping (Item) -> Void) {
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
            if case .data(_, _, let promise) = item { promise?.fail(ChannelError.ioOnClosedChannel) }
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
        for toxic in wanted {
            if let stage = old.first(where: { Self.sameName($0.toxic.name, toxic.name) }) {
                if stage.toxic != toxic {
                    self.interrupt(stage)
                    stage.toxic = toxic
                    stage.applies = self.draw(toxic)
                    stage.owed = 0
                }
                next.append(stage)
            } else {
                next.append(Stage(toxic: toxic, applies: self.draw(toxic)))
            }
        }
        // A removed stage hands what it held to the stage that followed it.
        var handOver: [(after: Stage?, items: [Item], closes: Bool)] = []
        for (index, stage) in old.enumerated() where !next.contains(where: { $0 === stage }) {
            stage.idle?.cancel()
            if stage.resetting {
                // A reset under way goes ahead, as Toxiproxy's does (its wait cannot be cut short).
                stage.queue.removeAll()
                continue
            }
            stage.timer?.cancel()
            stage.waiting = false
            var items: [Item] = stage.inHand.map { [$0] } ?? []
            stage.inHand = nil
            items.append(contentsOf: stage.queue)
            stage.queue.removeAll()
            var closes = false
            // Toxiproxy 2.12 closes the stream a timeout held when it is taken away (every
            // connection's, drawn or not); on a netcond link the held data is delivered instead,
            // as a network delivers after an outage.
            if case .timeout = stage.toxic.kind, !stage.closed, !self.onLink { closes = true }
            stage.closed = true
            let previous = old[..<index].reversed().first { kept in next.contains { $0 === kept } }
            handOver.append((previous, items, closes))
        }
        self.stages = next
        for stage in next where stage.idle == nil { self.startIdleClock(stage) }
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

    /// Stops every timer; what the stages hold is dropped (the connection is gone: a write held
    /// fails, as a write to a closed channel does).
    func stop() {
        guard !self.stopped else { return }
        self.stopped = true
        for stage in self.stages {
            stage.timer?.cancel()
            stage.idle?.cancel()
            for item in (stage.inHand.map { [$0] } ?? []) + Array(stage.queue) {
                self.heldBytes -= item.bytes
                if case .data(_, _, let promise) = item { promise?.fail(ChannelError.ioOnClosedChannel) }
            }
            stage.inHand = nil
            stage.queue.removeAll()
        }
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
        if case .data(_, _, let promise) = item { promise?.succeed() }
    }

    /// The stage takes what waits for it, one item at a time, until it has to wait.
    private func resume(_ stage: Stage) {
        while !self.stopped, self.index(of: stage) != nil, !stage.waiting, !stage.queue.isEmpty {
            self.take(stage.queue.removeFirst(), stage: stage)
        }
    }

    private func handOn(_ item: Item, from stage: Stage) {
        if case .end = item { stage.closed = true }
        self.enter(item, at: (self.index(of: stage) ?? self.stages.count) + 1)
    }

    /// Waits until `due`, holding `item` (if any), then runs `then` and takes what waits.
    private func wait(_ stage: Stage, holding item: Item?, until due: NIODeadline, then: @escaping (Item?) -> Void) {
        stage.inHand = item
        stage.waiting = true
        stage.timer = self.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [weak self] in
            guard let self, stage.waiting else { return }
            let held = stage.inHand
            stage.inHand = nil
            stage.waiting = false
            stage.timer = nil
            then(held)
            if !stage.waiting { self.resume(stage) }
        }
    }

    private func take(_ item: Item, stage: Stage) {
        if stage.closed { return self.drop(item) }
        guard stage.applies else { return self.handOn(item, from: stage) }
        let now = self.eventLoop.now
        switch (stage.toxic.kind, item) {
        case (.latency(let latency, let jitter), .data(let buffer, let stamp, let promise)):
            var milliseconds = latency
            if jitter > 0 { milliseconds += Int64.random(in: 0..<(2 * jitter), using: &self.random) - jitter }
            let due = stamp + .milliseconds(milliseconds)
            let moved = Item.data(buffer, stamp: max(due, stamp), promise: promise)
            guard due > now else { return self.handOn(moved, from: stage) }
            self.wait(stage, holding: moved, until: due) { held in held.map { self.handOn($0, from: stage) } }

        case (.bandwidth(let rate), .data(let buffer, let stamp, let promise)) where rate > 0:
            stage.owed += Int64(buffer.readableBytes) * 1_000_000 / rate
            self.pace(buffer, stamp: stamp, promise: promise, rate: rate, stage: stage)

        case (.timeout(let milliseconds), .data):
            if milliseconds > 0 { self.startIdleClock(stage) }
            if self.onLink { self.handOn(item, from: stage) } else { self.drop(item) }

        case (.resetPeer(let milliseconds), _):
            // The first chunk (or the end) is taken; the stream is reset that long after.
            self.drop(item)
            stage.resetting = true
            self.wait(stage, holding: nil, until: now + .milliseconds(milliseconds)) { _ in
                stage.resetting = false
                for waiting in stage.queue { self.drop(waiting) }
                stage.queue.removeAll()
                self.handOn(.end(.reset), from: stage)
            }

        case (.limitData(let limit), .data(var buffer, let stamp, let promise)):
            let room = max(0, limit - stage.passed)
            if Int64(buffer.readableBytes) > room {
                self.heldBytes -= buffer.readableBytes - Int(room)
                buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(room))!
            }
            if buffer.readableBytes > 0 {
                stage.passed += Int64(buffer.readableBytes)
                self.handOn(.data(buffer, stamp: stamp, promise: promise), from: stage)
            } else {
                promise?.succeed()
            }
            if limit - stage.passed <= 0 {
                for waiting in stage.queue { self.drop(waiting) }
                stage.queue.removeAll()
                self.handOn(.end(.close), from: stage)
            }

        case (.slowClose(let delay), .end):
            self.wait(stage, holding: item, until: now + .milliseconds(delay)) { held in held.map { self.handOn($0, from: stage) } }

        case (.slicer(let average, let variation, let delay), .data(let buffer, let stamp, let promise)):
            let sizes = self.slices(length: buffer.readableBytes, average: Int(average), variation: Int(variation))
            self.slice(buffer, sizes: sizes[...], stamp: stamp, promise: promise, delay: delay, stage: stage)

        case (.timeout, .end), (.latency, .end), (.bandwidth, _), (.limitData, .end), (.slowClose, .data),
            (.slicer, .end), (.noop, _):
            self.handOn(item, from: stage)
        }
    }

    /// `bandwidth`: more than 100 ms of data goes on a 100 ms piece at a time; the rest once the
    /// sleep it owes has passed (a late timer's overshoot is taken off the next sleep).
    private func pace(_ buffer: ByteBuffer, stamp: NIODeadline, promise: EventLoopPromise<Void>?, rate: Int64, stage: Stage) {
        let piece = Int(min(Int64(Int32.max), rate * 100))
        let now = self.eventLoop.now
        if buffer.readableBytes > piece {
            let item = Item.data(buffer, stamp: stamp, promise: promise)
            self.wait(stage, holding: item, until: now + .milliseconds(100)) { held in
                guard case .data(var rest, let stamp, let promise) = held else { return }
                let first = rest.readSlice(length: piece)!
                stage.owed -= 100_000_000
                self.enter(.data(first, stamp: stamp, promise: nil), at: (self.index(of: stage) ?? self.stages.count) + 1)
                self.pace(rest, stamp: stamp, promise: promise, rate: rate, stage: stage)
            }
            return
        }
        let item = Item.data(buffer, stamp: stamp, promise: promise)
        guard stage.owed > 0 else { return self.handOn(item, from: stage) }
        self.wait(stage, holding: item, until: now + .nanoseconds(stage.owed)) { held in
            stage.owed -= (self.eventLoop.now - now).nanoseconds
            held.map { self.handOn($0, from: stage) }
        }
    }

    /// Toxiproxy's slicing: a span longer than `average + variation` is halved (the middle moved
    /// by up to ± `variation`), and each half again, until every piece is short enough.
    private func slices(length: Int, average: Int, variation: Int) -> [Int] {
        var sizes: [Int] = []
        var spans = [(0, length)]
        while let (start, end) = spans.popLast() {
            if (end - start) - average <= variation || end - start < 2 {
                if end > start { sizes.append(end - start) }
                continue
            }
            var middle = start + (end - start) / 2
            if variation > 0 { middle += Int.random(in: 0..<(2 * variation), using: &self.random) - variation }
            middle = min(max(middle, start + 1), end - 1)
            spans.append((middle, end))
            spans.append((start, middle))
        }
        return sizes
    }

    /// `slicer`: one piece goes on, then a pause of `delay` µs (after the last piece too; with no
    /// delay, every piece at once).
    private func slice(
        _ buffer: ByteBuffer, sizes: ArraySlice<Int>, stamp: NIODeadline, promise: EventLoopPromise<Void>?, delay: Int64,
        stage: Stage
    ) {
        var buffer = buffer
        var sizes = sizes
        while delay == 0, let size = sizes.first, buffer.readableBytes > 0 {
            sizes = sizes.dropFirst()
            let piece = buffer.readSlice(length: min(size, buffer.readableBytes))!
            let last = buffer.readableBytes == 0 || sizes.isEmpty
            self.enter(.data(piece, stamp: stamp, promise: last ? promise : nil), at: (self.index(of: stage) ?? self.stages.count) + 1)
            if last { return }
        }
        guard let size = sizes.popFirst(), buffer.readableBytes > 0 else {
            promise?.succeed()
            return
        }
        let piece = buffer.readSlice(length: min(size, buffer.readableBytes))!
        let last = buffer.readableBytes == 0
        self.enter(.data(piece, stamp: stamp, promise: last ? promise : nil), at: (self.index(of: stage) ?? self.stages.count) + 1)
        let rest: Item? = last ? nil : .data(buffer, stamp: stamp, promise: promise)
        self.wait(stage, holding: rest, until: self.eventLoop.now + .microseconds(delay)) { held in
            guard case .data(let remaining, let stamp, let promise) = held else { return }
            self.slice(remaining, sizes: sizes, stamp: stamp, promise: promise, delay: delay, stage: stage)
        }
    }

    /// `timeout`'s clock: the stream is closed once `timeout` ms pass without a chunk.
    private func startIdleClock(_ stage: Stage) {
        stage.idle?.cancel()
        stage.idle = nil
        guard stage.applies, !stage.closed, case .timeout(let milliseconds) = stage.toxic.kind, milliseconds > 0 else { return }
        stage.idle = self.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) { [weak self] in
            guard let self, !stage.closed else { return }
            for waiting in stage.queue { self.drop(waiting) }
            stage.queue.removeAll()
            self.handOn(.end(.close), from: stage)
        }
    }

    /// A stage's wait is cut short by an update: what it held goes on now ("no data on the
    /// floor"), not through the stage again.
    private func interrupt(_ stage: Stage) {
        stage.idle?.cancel()
        stage.idle = nil
        guard !stage.resetting else { return }  // a reset under way is not stopped, as in Toxiproxy
        stage.timer?.cancel()
        stage.timer = nil
        stage.waiting = false
        if let held = stage.inHand {
            stage.inHand = nil
            self.handOn(held, from: stage)
        }
    }
}
