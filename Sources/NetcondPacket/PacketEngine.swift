import CNetcondPacket
import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// The packet engine: the command's own packets, both directions, through the emulated link.
///
/// ```
///  command (cgroup) ──▶ OUTPUT ──▶ NFQUEUE up ───┐             ┌─▶ verdict accept at the
///                                               ├─▶ LinkPath ──┤   delivery moment, or drop
///  command (cgroup) ◀── INPUT  ◀── NFQUEUE down ─┘   (per dir.) └─▶ (held in the kernel meanwhile)
/// ```
/// A thin driver: one thread serves both queues. It reads every packet waiting (many per read),
/// hands it to the ``PacketLinkDriver`` (the set-up rules, the portal's gate and the ``LinkPaths``
/// both engines drive: pure, and tested without root), and carries out what that decides — a
/// verdict when the packet is due (many per write), a drop, a copy, a changed byte, a reset, an
/// answer in a server's place — waiting in between with a nanosecond timer. A packet stays in the
/// kernel until its verdict: the engine keeps only its number.
///
/// GSO: a direction whose link decides nothing per packet (no rate, loss, jitter or reordering)
/// takes a TCP send of many segments whole, one verdict for all (they would cross an unlimited
/// link together anyway); otherwise, and whenever a capture is written, the kernel segments it and
/// each 1,500-byte packet has its own fate.
public final class PacketEngine: @unchecked Sendable {
    public let profile: Profile
    public let seed: UInt64
    public let cage: PacketCage
    let queue: NetfilterQueue
    let upQueue: UInt16
    private let wake: Int32
    private let startedAt: Int64
    /// The engine clock's zero, in CLOCK_MONOTONIC (uptime) nanoseconds: its instants plus this are
    /// on the clock the origin stamps requests with.
    public var clockOrigin: Int64 { self.startedAt }
    private let lock = NSLock()
    private var stopRequested = false
    var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    // Engine thread only.
    var driver: PacketLinkDriver
    /// Raw sockets the resets and copies go out on (marked as having crossed the link).
    let raw4: Int32
    let raw6: Int32
    /// Copies and answers to send once the verdicts before them are out.
    var copies: [[UInt8]] = []
    /// Whether the queues hand over whole packets (a capture, a duplicate or a corruption needs them).
    private var copyingWhole: Bool
    private var wholeGSO: [Bool]
    /// The configuration part of ``PacketLinkDriver/passesAtOnce(_:)`` for each direction, as
    /// ``reconsiderAtOnce()`` last read it.
    var configurationAtOnce = (up: false, down: false)
    /// The last read of the queue read its most and left packets waiting (``readAll()``).
    var flooded = false
    /// The number each log group's next copy should have (nil: none seen yet).
    var nextCopyNumbers: [UInt32?] = [nil, nil]
    /// Where ``readRing()`` parses the ring's copies, and how many the ring has said it lost.
    let ringCopies = UnsafeMutablePointer<ncq_packet>.allocate(capacity: PacketEngine.ringBatch)
    var ringUnseen = 0
    let capture: PacketCapture?
    /// Poll instead of sleeping in the last ``spinWindow`` before a verdict is due.
    private let precise: Bool
    /// How long before a verdict's moment `--low-latency` stops sleeping and polls. On a 2-core VM
    /// (`scripts/bench --only 9c`, interleaved runs) a 300 µs window left 1 in 100 verdicts 0.5-2.7
    /// ms late (the round trip's p99 1.0-1.8 ms); 1 ms: p99 0.18 ms late; 2 ms: 0.03-0.08 ms. A
    /// window set from how late the thread's own timed sleeps ended (their 99.9th percentile) did
    /// no better than 0.15-0.35 ms: the sleep's own lateness is not all of it. Polling costs CPU
    /// only in the window before a moment, and only under `--low-latency`.
    static let spinWindow: Int64 = 2_000_000
    /// How long the thread stays awake after a packet moved (read, or let go), polling the queue
    /// and yielding the CPU between polls, before it sleeps: the next packet of an exchange (the
    /// answer to the one just let go) usually comes within tens of microseconds, and is then read
    /// without a wake-up from idle (about 10 µs each on a 2-core VM, twice per round trip).
    /// An idle link costs nothing: the thread sleeps once this has passed since the last packet.
    static let awakeAfterPacket: Int64 = 100_000
    /// When each packet reached the link (the kernel's stamps, on the engine's clock).
    var arrivals: PacketArrivals
    /// An IPv6-only run's translator (nil: the device has IPv4).
    var nat64: NAT64?

    // Under the lock: what the summary reads, and commands waiting for the engine thread.
    private var published = PacketSummary()
    /// The routes' timelines as the engine last published them (nil: no routes).
    private var publishedRoutes: PublishedRoutes?
    private var recordsAtStop: [PacketFlowRecord] = []
    private var lookupsAtStop: [PacketLookupFailure] = []
    private var radioAtStop: RadioModel?
    /// Work for the engine's thread (live commands, reads of its state), in order; `changes`: it
    /// may change the link (the kernel must not pass packets meanwhile).
    private var commands: [(changes: Bool, body: () -> Void)] = []

    init(
        profile: Profile, seed: UInt64, queue: NetfilterQueue, upQueue: UInt16, cage: PacketCage, wake: Int32,
        wholeGSO: [Bool], raw: (Int32, Int32), capture: PacketCapture?, precise: Bool,
        onStateChange: (@Sendable (LinkState, Span) -> Void)?
    ) {
        self.capture = capture
        self.precise = precise
        self.raw4 = raw.0
        self.raw6 = raw.1
        self.profile = profile
        self.seed = seed
        self.queue = queue
        self.upQueue = upQueue
        self.cage = cage
        self.wake = wake
        self.startedAt = ncq_now()
        self.arrivals = PacketArrivals(offset: ncq_now() - ncq_wall_now() - self.startedAt)
        self.driver = PacketLinkDriver(profile: profile, seed: seed) { state, moment in
            onStateChange?(state, Span(nanoseconds: moment.nanoseconds))
        }
        self.wholeGSO = wholeGSO
        self.copyingWhole = capture != nil || profile.ipv6Only != nil || self.driver.needsWholePackets
        self.driver.summary.pathMSSProblem = cage.pathMSSProblem
        self.driver.summary.ringProblem = cage.ringProblem
        self.nat64 = profile.ipv6Only.map { NAT64(spec: $0, slot: cage.slot) }
        self.driver.nat64 = profile.ipv6Only
        // Until the thread first publishes, a summary says what the link starts as.
        self.published.profile = profile.name
        self.published.state = self.driver.timeline.state
        self.published.conditions = self.driver.timeline.conditions
        onStateChange?(self.driver.timeline.state, .zero)
        self.reconsiderAtOnce()
    }

    deinit { self.ringCopies.deallocate() }

    /// Stops the thread and unbinds the queues (packets still held are dropped), then removes the
    /// cage (killing what still runs in it). Safe to call twice.
    public func stop() {
        self.lock.lock()
        let already = self.stopRequested
        self.stopRequested = true
        self.lock.unlock()
        if !already {
            ncq_wake(self.wake)
            self.finished.wait()
            close(self.wake)
            close(self.raw4)
            close(self.raw6)
            self.capture?.close()
            self.queue.close()
            self.thread = nil
        }
        self.cage.remove()
    }

    /// Applies a change on the engine's thread (in order with the packets) and returns the summary
    /// after it; nil only reads it.
    public func control(_ command: PacketCommand?) async -> PacketSummary {
        await self.onEngineThread(changes: command != nil) { () -> PacketSummary in
            let now = self.now
            self.follow(to: now)
            // What was due before the change goes first (it met the old conditions).
            self.release(upTo: now)
            if let command {
                self.driver.control(command, at: now)
                self.setUpQueues()
            }
            self.publish()
            return self.summary()
        } ?? self.summary()
    }

    /// Closes (a gate) or opens (nil) the captive portal's gate on the packets leaving the cage.
    /// Returns at once; the engine's thread applies it in order with the packets.
    public func setCaptiveGate(_ gate: PacketCaptiveGate?) {
        self.lock.lock()
        let stopped = self.stopRequested
        if !stopped { self.commands.append((true, { self.driver.captiveGate = gate })) }
        self.lock.unlock()
        if !stopped { ncq_wake(self.wake) }
    }

    /// Names the command resolves without DNS (the session's hosts file: the origin's, the
    /// portal's) to `address` (as text): connections to it match routes by those names, as those to
    /// an address a DNS answer gave do. Returns at once; applied in order with the packets.
    public func learn(address: String, names: [String]) {
        guard let bytes = AddressBlock.parseAddress(address) else { return }
        self.lock.lock()
        let stopped = self.stopRequested
        if !stopped {
            // Names only route connections (none while the kernel passes): not a change of the link.
            self.commands.append((false, { for name in names { self.driver.learn(name: name, addresses: [bytes]) } }))
        }
        self.lock.unlock()
        if !stopped { ncq_wake(self.wake) }
    }

    /// What the link saw of every TCP connection so far (for a scenario's evidence).
    public func flowRecords() async -> [PacketFlowRecord] {
        await self.onEngineThread { self.driver.flows.records } ?? self.atStop(\.recordsAtStop)
    }

    /// The DNS lookups `dns_fail` answered with "no such name" so far.
    public func lookupFailures() async -> [PacketLookupFailure] {
        await self.onEngineThread({ self.driver.lookups }) ?? self.atStop(\.lookupsAtStop)
    }

    /// The device's radio as the access link's packets drove it (nil: the profile has no `radio:`).
    /// Its moments count from ``clockOrigin``.
    public func radio() async -> RadioModel? {
        await self.onEngineThread({ self.driver.network.radio }) ?? self.atStop(\.radioAtStop)
    }

    /// What was kept when the engine stopped.
    private func atStop<T>(_ field: KeyPath<PacketEngine, T>) -> T {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self[keyPath: field]
    }

    /// Runs `body` on the engine's thread; nil once the engine has stopped.
    private func onEngineThread<T: Sendable>(changes: Bool = false, _ body: @escaping () -> T) async -> T? {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            self.lock.lock()
            if self.stopRequested {
                self.lock.unlock()
                continuation.resume(returning: nil)
                return
            }
            self.commands.append((changes, { continuation.resume(returning: body()) }))
            self.lock.unlock()
            ncq_wake(self.wake)
        }
    }

    private func runCommands() {
        self.lock.lock()
        let commands = self.commands
        self.commands = []
        self.lock.unlock()
        guard !commands.isEmpty else { return }
        // What the kernel passed so far is counted first; a change stops it passing (Docs/engines.md).
        if self.cage.passingInKernel {
            if commands.contains(where: \.changes) { self.stopPassingInKernel() } else { _ = self.readAll() }
        }
        for command in commands { command.body() }
        self.reconsiderAtOnce()
    }

    /// What crossed the link so far.
    func routesSnapshot() -> PublishedRoutes? {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.publishedRoutes
    }

    public func summary() -> PacketSummary {
        self.lock.lock()
        defer { self.lock.unlock() }
        var summary = self.published
        summary.elapsed = Span(nanoseconds: ncq_now() - self.startedAt)
        return summary
    }

    var now: Instant { Instant(nanoseconds: ncq_now() - self.startedAt) }

    /// The engine's clock less the wall clock (the kernel's stamps are on the wall clock), now.
    var wallToEngine: Int64 { ncq_now() - ncq_wall_now() - self.startedAt }

    func run() {
        ncq_precise_timers()
        defer { self.finished.signal() }
        var lastPublished = Instant.zero
        // As if the last packet moved long ago: not awake, and quiet enough for the kernel to pass.
        var lastMoved = Instant(nanoseconds: -max(Self.awakeAfterPacket, Self.quietBeforePassing))
        var cachesCold = false
        while true {
            self.considerPassingInKernel(lastMoved: lastMoved)
            self.follow(to: self.now)
            self.release(upTo: self.now)
            // The verdicts first: a packet the link delivered at this moment reaches its socket
            // before a reset due now, as it would on a wire (and the reset's sequence number counts it).
            let moved = self.queue.flush()
            self.sendInjected(upTo: self.now)
            self.sendResets(upTo: self.now)
            let now = self.now
            if moved { lastMoved = now }
            if now - lastPublished >= .milliseconds(50) {
                self.publish()
                lastPublished = now
            }
            self.runCommands()
            self.lock.lock()
            let stopping = self.stopRequested
            self.lock.unlock()
            if stopping { break }
            // Until the next moment something is due, at most 50 ms.
            var due = self.driver.nextMomentInPlace().map { max(0, ($0 - now).nanoseconds) }
            if let leave = self.passingEnds() { due = min(due ?? .max, max(0, (leave - now).nanoseconds)) }
            var timeout: Int64 = min(50_000_000, due ?? .max)
            // Precise mode: sleep until ``spinWindow`` before the moment, then poll.
            if self.precise, let due { timeout = due <= Self.spinWindow ? 0 : min(timeout, due - Self.spinWindow) }
            // Precise mode, polling after a sleep of over 1 ms: the pop at the moment would find the
            // CPU's caches cold (a VM's idle CPU loses them), so a copy of it is made first.
            if self.precise, let due, due <= Self.spinWindow {
                if cachesCold {
                    self.driver.warmUp(upTo: now + Span(nanoseconds: due))
                    cachesCold = false
                }
            } else if timeout > 1_000_000 {
                cachesCold = true
            }
            if self.cage.passingInKernel {
                // No packet waits for the thread: it reads the copies now and then, not woken by each.
                _ = ncq_wait(-1, self.wake, min(timeout, Self.passingReadInterval))
                if self.readAll() { lastMoved = self.now }
                continue
            }
            // Awake for a while after a packet moved: its answer usually follows within tens of µs.
            let awake = max(0, Self.awakeAfterPacket - (now - lastMoved).nanoseconds)
            let ready = ncq_wait_spinning(self.queue.descriptor, self.wake, awake, timeout)
            if ready > 0 && ready & 1 != 0 && self.readAll() { lastMoved = self.now }
        }
        // The copies of what the kernel passed last.
        if self.cage.passingInKernel { _ = self.readAll() }
        self.publish()
        self.runCommands()
        let records = self.driver.flows.records
        self.lock.lock()
        self.recordsAtStop = records
        self.lookupsAtStop = self.driver.lookups
        self.radioAtStop = self.driver.network.radio
        self.lock.unlock()
    }

    // MARK: - Carrying out

    /// Applies the timelines' changes due by `now` (the access link's, the routes'), carrying out
    /// before each what came before it.
    func follow(to now: Instant) {
        guard let next = self.driver.nextChangeInPlace(), next <= now else { return }
        var events: [NetworkEvent<HeldPacket>] = []
        self.driver.follow(to: now) { events.append($0) }
        for event in events { self.carryOut(event, at: now) }
        self.setUpQueues()
    }

    /// Carries out everything the network delivered, or dropped on a route's path, by `now`.
    func release(upTo now: Instant) {
        while let event = self.driver.popEvent(upTo: now) { self.carryOut(event, at: now) }
    }

    /// A delivered packet goes on; one a route's path dropped after the access link took it is
    /// dropped now (the driver counted it).
    private func carryOut(_ event: NetworkEvent<HeldPacket>, at now: Instant) {
        switch event {
        case .delivered(let direction, let delivery):
            self.accept(delivery, direction, at: now)
        case .dropped(_, let packet, _):
            if packet.letGoAt != nil {
                self.driver.summary.letGoTooSoon += 1
                return
            }
            self.queue.verdict(queue: packet.queue, id: packet.id, accept: false, mark: 0)
            if let capture = self.capture, capture.wantsDrops, let bytes = packet.bytes {
                capture.write(bytes, length: packet.length, delivered: false, atMonotonic: ncq_now())
            }
        }
    }

    /// Lets a packet go: the link has delivered it (with a byte changed, or as a copy, when the
    /// link said so).
    private func accept(_ delivery: PathDelivery<HeldPacket>, _ direction: Direction, at now: Instant) {
        // A packet let go at once had its verdict then.
        let late = (delivery.unit.letGoAt ?? now) - delivery.at
        self.driver.summary.lateness.record(late)
        if let letGoAt = delivery.unit.letGoAt {
            // Its verdict is out: what the link decided only counts, unless it was not what was certain.
            if delivery.isCopy || delivery.corruptByte != nil || delivery.at > letGoAt {
                self.driver.summary.letGoTooSoon += 1
            }
            if !delivery.isCopy { self.driver.delivered(delivery, direction, corrupted: false) }
            return
        }
        let packet = delivery.unit
        if packet.nat64 != 0 {
            self.deliverTranslated(delivery, direction)
            return
        }
        if delivery.isCopy {
            // The copy goes once the originals' verdicts are out (``sendCopies``): it arrives second.
            guard let bytes = packet.bytes else { return }
            self.copies.append(bytes)
            self.driver.delivered(delivery, direction, corrupted: false)
            return
        }
        var payload: [UInt8]?
        if let offset = delivery.corruptByte, var bytes = packet.bytes {
            Self.corrupt(&bytes, offset: offset)
            payload = bytes
        }
        self.queue.verdict(queue: packet.queue, id: packet.id, accept: true, mark: packet.mark, payload: payload)
        self.driver.delivered(delivery, direction, corrupted: payload != nil)
        if let capture = self.capture, let bytes = payload ?? packet.bytes {
            capture.write(bytes, length: packet.length, delivered: true, atMonotonic: ncq_now())
        }
    }

    /// Sets the queues up for the conditions in force (the access link's and the routes'): whole
    /// packets when a duplicate, a corruption or `dns_fail` needs them; GSO packets whole where no
    /// path decides anything per packet.
    private func setUpQueues() {
        self.reconsiderAtOnce()
        if !self.copyingWhole && self.driver.needsWholePackets {
            self.copyingWhole = true
            for number in [self.upQueue, self.upQueue &+ 1] {
                _ = ncq_set_copy(self.queue.descriptor, number, Self.wholePacket)
            }
        }
        for (index, direction) in Direction.allCases.enumerated() {
            let whole = self.capture == nil && self.nat64 == nil && self.driver.decidesNothingPerPacket(direction)
            if whole != self.wholeGSO[index] {
                self.wholeGSO[index] = whole
                try? self.queue.setWholeGSO(whole, queue: self.upQueue &+ UInt16(index), waiting: false)
            }
        }
    }

    private func publish() {
        self.capture?.flush()
        var summary = self.driver.summary
        summary.vanished = Int(self.queue.errorReplies)
        summary.connectionsOpen = self.driver.flows.count
        summary.state = self.driver.timeline.state
        summary.conditions = self.driver.timeline.conditions
        summary.profile = self.driver.timeline.profile.name
        let routes =
            self.driver.network.pathRoutes.isEmpty
            ? nil
            // Copies of arrays the driver holds: shared until it changes one.
            : PublishedRoutes(
                timelines: self.driver.network.routeTimelines, routes: self.driver.network.pathRoutes,
                inForce: self.driver.network.routesInForce)
        self.lock.lock()
        self.published = summary
        self.publishedRoutes = routes
        self.lock.unlock()
    }
}
