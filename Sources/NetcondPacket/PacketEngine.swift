import CNetcondPacket
import Foundation
import HeapModule
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// The packet engine: the command's own packets, both directions, through the emulated link.
///
/// ```
///  command (cgroup) ──▶ OUTPUT ──▶ NFQUEUE up ───┐             ┌─▶ verdict accept at the
///                                               ├─▶ PacketLink ┤   delivery moment, or drop
///  command (cgroup) ◀── INPUT  ◀── NFQUEUE down ─┘   (per dir.) └─▶ (held in the kernel meanwhile)
/// ```
/// One thread serves both queues: it reads every packet waiting (many per read), asks the
/// direction's ``PacketLink`` for its fate, and sends the verdicts (many per write) when they fall
/// due, waiting in between with a nanosecond timer. A packet stays in the kernel until its verdict:
/// the engine keeps only its number.
///
/// GSO: a direction whose link decides nothing per packet (no rate, loss, jitter or reordering)
/// takes a TCP send of many segments whole, one verdict for all (they would cross an unlimited
/// link together anyway); otherwise, and whenever a capture is written, the kernel segments it and
/// each 1,500-byte packet has its own fate.
public final class PacketEngine: @unchecked Sendable {
    public let profile: Profile
    public let seed: UInt64
    public let cage: PacketCage
    private let queue: NetfilterQueue
    private let upQueue: UInt16
    private let wake: Int32
    private let startedAt: Int64
    /// The engine clock's zero, in CLOCK_MONOTONIC (uptime) nanoseconds: its instants plus this are
    /// on the clock the origin stamps requests with.
    public var clockOrigin: Int64 { self.startedAt }
    private let lock = NSLock()
    private var stopRequested = false
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    // Engine thread only.
    private var links: [PacketLink]
    private var held = Heap<HeldPacket>()
    private var resets = Heap<ScheduledReset>()
    private var flows = TCPFlowTable()
    /// Raw sockets the resets go out on (marked as having crossed the link).
    private let raw4: Int32
    private let raw6: Int32
    private var sequence: UInt64 = 0
    private var timeline: ConditionTimeline
    private var conditions: LinkConditions
    private var outage: OutageBehaviour?
    /// A closed captive portal's gate on what leaves the cage (nil: no portal, or open).
    private var captiveGate: PacketCaptiveGate?
    /// The profile's set-up rules (firewall, connect_hold, dns_fail), and what they need to count.
    private var setup: SetupRules
    private var connectAttempts = 0
    /// The lookups `dns_fail` failed, in order (for a scenario's evidence).
    private var lookups: [PacketLookupFailure] = []
    private var holdUntil: [FlowKey: Instant] = [:]
    /// Packets netcond sends in a server's place (a DNS failure's answer), due at their moments.
    private var injected = Heap<InjectedPacket>()
    private var stalled = [false, false]
    /// Packets a stalled direction delivered meanwhile, in order: they go when the stall ends, at
    /// the link rate.
    private var stalledPackets: [[HeldPacket]] = [[], []]
    /// What came to a stalled direction: its buffer fills, and beyond the queue limit drops.
    private var stallBacklog = [(bytes: 0, packets: 0), (bytes: 0, packets: 0)]
    /// After a stall, when the link is free for the next packet of its backlog (nil: no backlog).
    private var drainFree: [Instant?] = [nil, nil]
    /// `connection_bandwidth`: each TCP connection's own rate, per direction.
    private var pacers = [ConnectionPacer<FlowKey>(), ConnectionPacer<FlowKey>()]
    /// Duplicates to send once the originals' verdicts are out.
    private var copies: [[UInt8]] = []
    /// Whether the queues hand over whole packets (a capture, a duplicate or a corruption needs them).
    private var copyingWhole: Bool
    private var wholeGSO: [Bool]
    private var lastState: LinkState
    private let onStateChange: (@Sendable (LinkState, Span) -> Void)?
    private let capture: PacketCapture?
    /// Poll instead of sleeping in the last ``spinWindow`` before a verdict is due.
    private let precise: Bool
    static let spinWindow: Int64 = 300_000
    private var working = PacketSummary()
    /// When each packet reached the link (the kernel's stamps, on the engine's clock).
    private var arrivals: PacketArrivals

    // Under the lock: what the summary reads, and commands waiting for the engine thread.
    private var published = PacketSummary()
    private var recordsAtStop: [PacketFlowRecord] = []
    private var lookupsAtStop: [PacketLookupFailure] = []
    /// Work for the engine's thread (live commands, reads of its state), in order.
    private var commands: [() -> Void] = []

    private init(
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
        self.timeline = ConditionTimeline(profile: profile, seed: seed)
        self.conditions = self.timeline.conditions
        self.links = [
            PacketLink(PacketImpairments(self.conditions.up), seed: Self.linkSeed(seed, direction: 0)),
            PacketLink(PacketImpairments(self.conditions.down), seed: Self.linkSeed(seed, direction: 1)),
        ]
        self.wholeGSO = wholeGSO
        self.setup = profile.setup
        self.copyingWhole = capture != nil || Self.needsWholePackets(self.conditions, profile.setup)
        self.lastState = self.timeline.state
        self.onStateChange = onStateChange
        self.outage = self.timeline.outage
        self.stalled = [self.timeline.isStalled(.up), self.timeline.isStalled(.down)]
        self.working.pathMSSProblem = cage.pathMSSProblem
    }

    /// Checks the privilege, removes what a dead netcond left, binds the queues, makes the cage and
    /// starts the thread. Packets of the cage's processes cross the link from then on.
    public static func start(
        profile: Profile, seed: UInt64, capture: PacketCapture? = nil, precise: Bool = false,
        onStateChange: (@Sendable (LinkState, Span) -> Void)? = nil
    ) throws(PacketEngineError) -> PacketEngine {
        try PacketPrivilege.check()
        try Self.checkSupported(profile)
        PacketCage.removeStale()
        let queue = try NetfilterQueue()
        let start = UInt16(truncatingIfNeeded: 1000 + (Int(getpid()) % 30_000) * 2)
        // A capture needs whole packets, and the packets of the wire (GSO ones segmented).
        let first = ConditionTimeline(profile: profile, seed: seed).conditions
        let whole = capture != nil || Self.needsWholePackets(first, profile.setup)
        let up = try queue.bindPair(from: start, copyRange: whole ? Self.wholePacket : Self.headOnly)
        let wholeGSO = capture != nil ? [false, false]
            : [Self.decidesNothingPerPacket(first.up), Self.decidesNothingPerPacket(first.down)]
        for (whole, number) in zip(wholeGSO, [up, up &+ 1]) {
            try queue.setWholeGSO(whole, queue: number, waiting: true)
        }
        let wake = ncq_wake_open()
        guard wake >= 0 else { throw .system("cannot make an eventfd", -wake) }
        let cage: PacketCage
        do {
            cage = try PacketCage(queue: up)
        } catch {
            close(wake)
            throw error
        }
        // Resets go out marked as having crossed the link already: the cage's rules let them be.
        let raw4 = ncq_raw_open(4, cage.mark | PacketCage.passedBit)
        let raw6 = ncq_raw_open(6, cage.mark | PacketCage.passedBit)
        guard raw4 >= 0, raw6 >= 0 else {
            let code = raw4 < 0 ? -raw4 : -raw6
            if raw4 >= 0 { close(raw4) }
            if raw6 >= 0 { close(raw6) }
            close(wake)
            cage.remove()
            throw .system("cannot open a raw socket for resets", code)
        }
        let engine = PacketEngine(
            profile: profile, seed: seed, queue: queue, upQueue: up, cage: cage, wake: wake, wholeGSO: wholeGSO,
            raw: (raw4, raw6), capture: capture, precise: precise, onStateChange: onStateChange)
        let thread = Thread { engine.run() }
        thread.name = "netcond packet engine"
        thread.qualityOfService = .userInteractive
        engine.thread = thread
        thread.start()
        return engine
    }

    /// The profile features the packet engine does not do yet: refused before anything runs.
    public static func unsupportedFeatures(_ profile: Profile) -> [String] {
        var features: [String] = []
        if !profile.faults.isEmpty { features.append("HTTP faults (they need a proxy that reads HTTP)") }
        return features
    }

    static func checkSupported(_ profile: Profile) throws(PacketEngineError) {
        let features = Self.unsupportedFeatures(profile)
        guard features.isEmpty else {
            throw .unsupported("profile \(profile.name) uses " + features.joined(separator: ", ")
                + ", which the packet engine does not emulate yet")
        }
    }

    /// The seed of one direction's link (0 up, 1 down) under run seed `seed`. The bench's reference
    /// emulator (`tcp_reference.py --netcond-draws`) draws its losses from the same streams, so the two
    /// can be compared seed by seed: change this and that script together.
    static func linkSeed(_ seed: UInt64, direction: UInt64) -> UInt64 {
        SeedDeriver.derive(seed, 0x5041_434B, direction)
    }

    static func decidesNothingPerPacket(_ direction: LinkDirection) -> Bool {
        direction.bandwidth == nil && direction.loss == .none && direction.jitter == .zero && direction.reorder == .zero
            && direction.duplicate == .zero && direction.corrupt == .zero && direction.connectionBandwidth == nil
    }

    /// Duplicates and corruption need each packet's bytes, not only its head; `dns_fail` a whole query.
    static func needsWholePackets(_ conditions: LinkConditions, _ setup: SetupRules) -> Bool {
        !setup.dnsFail.isEmpty || [conditions.up, conditions.down].contains { $0.duplicate > .zero || $0.corrupt > .zero }
    }

    static let headOnly: UInt32 = 128
    static let wholePacket: UInt32 = 65535

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
        await self.onEngineThread { () -> PacketSummary in
            let now = self.now
            self.followTimeline(to: now)
            switch command {
            case .switchProfile(let profile)?:
                self.timeline.switchProfile(to: profile, at: now)
                self.applyTimeline(at: now)
            case .outage(let outage)?:
                self.timeline.setOutage(outage, at: now)
                self.applyTimeline(at: now)
            case .stall(let stall)?:
                self.timeline.setStall(stall, at: now)
                self.applyTimeline(at: now)
            case .cut?:
                self.cutConnections(at: now)
            case nil:
                break
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
        if !stopped { self.commands.append { self.captiveGate = gate } }
        self.lock.unlock()
        if !stopped { ncq_wake(self.wake) }
    }

    /// What the link saw of every TCP connection so far (for a scenario's evidence).
    public func flowRecords() async -> [PacketFlowRecord] {
        await self.onEngineThread { self.flows.records } ?? self.finalRecords
    }

    /// The records as they were when the engine stopped.
    private var finalRecords: [PacketFlowRecord] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.recordsAtStop
    }

    /// The DNS lookups `dns_fail` answered with "no such name" so far.
    public func lookupFailures() async -> [PacketLookupFailure] {
        await self.onEngineThread({ self.lookups }) ?? self.finalLookups
    }

    private var finalLookups: [PacketLookupFailure] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.lookupsAtStop
    }

    /// Runs `body` on the engine's thread; nil once the engine has stopped.
    private func onEngineThread<T: Sendable>(_ body: @escaping () -> T) async -> T? {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            self.lock.lock()
            if self.stopRequested {
                self.lock.unlock()
                continuation.resume(returning: nil)
                return
            }
            self.commands.append { continuation.resume(returning: body()) }
            self.lock.unlock()
            ncq_wake(self.wake)
        }
    }

    private func runCommands() {
        self.lock.lock()
        let commands = self.commands
        self.commands = []
        self.lock.unlock()
        for command in commands { command() }
    }

    /// What crossed the link so far.
    public func summary() -> PacketSummary {
        self.lock.lock()
        defer { self.lock.unlock() }
        var summary = self.published
        summary.elapsed = Span(nanoseconds: ncq_now() - self.startedAt)
        return summary
    }

    private var now: Instant { Instant(nanoseconds: ncq_now() - self.startedAt) }

    /// The engine's clock less the wall clock (the kernel's stamps are on the wall clock), now.
    private var wallToEngine: Int64 { ncq_now() - ncq_wall_now() - self.startedAt }

    private func run() {
        ncq_precise_timers()
        defer { self.finished.signal() }
        self.onStateChange?(self.lastState, .zero)
        var lastPublished = Instant.zero
        while true {
            self.followTimeline(to: self.now)
            self.release(upTo: self.now)
            // The verdicts first: a packet the link delivered at this moment reaches its socket
            // before a reset due now, as it would on a wire (and the reset's sequence number counts it).
            self.queue.flush()
            self.sendInjected(upTo: self.now)
            self.sendResets(upTo: self.now)
            let now = self.now
            if now - lastPublished >= .milliseconds(50) {
                self.publish()
                lastPublished = now
            }
            self.runCommands()
            self.lock.lock()
            let stopping = self.stopRequested
            self.lock.unlock()
            if stopping { break }
            // Until the next moment something is due (a verdict, a change of conditions, a reset, an
            // injected answer), at most 50 ms.
            let next = Self.earliest(
                Self.earliest(self.held.min?.at, self.timeline.nextChange), Self.earliest(self.resets.min?.at, self.injected.min?.at))
            let due = next.map { max(0, ($0 - now).nanoseconds) }
            var timeout: Int64 = min(50_000_000, due ?? .max)
            // Precise mode: sleep until ``spinWindow`` before the moment, then poll (a wake-up from
            // sleep comes 0.1-0.5 ms late on a VM).
            if self.precise, let due { timeout = due <= Self.spinWindow ? 0 : min(timeout, due - Self.spinWindow) }
            let ready = ncq_wait(self.queue.descriptor, self.wake, timeout)
            if ready > 0 && ready & 1 != 0 { self.readAll() }
        }
        self.publish()
        self.runCommands()
        let records = self.flows.records
        self.lock.lock()
        self.recordsAtStop = records
        self.lookupsAtStop = self.lookups
        self.lock.unlock()
    }

    /// The earlier of two moments (nil: none); no array in the engine's loop.
    private static func earliest(_ a: Instant?, _ b: Instant?) -> Instant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }

    /// Reads every packet waiting (bounded, so that due verdicts are not held up by a flood).
    private func readAll() {
        for _ in 0..<64 {
            // The moment of the read, taken once it returned (a packet may have come during it).
            var read: (at: Instant, offset: Int64?)?
            let count = self.queue.receive { packet in
                if read == nil { read = (self.now, self.arrivals.read(offset: self.wallToEngine)) }
                self.admit(packet, readAt: read!.at, offset: read!.offset)
            }
            if count == -Int(ENOBUFS) {
                self.working.kernelDrops += 1
                continue
            }
            if count <= 0 { return }
        }
    }

    /// A packet read at `readAt` (with the read's clock `offset`) reaches the link: its fate.
    private func admit(_ packet: ncq_packet, readAt: Instant, offset: Int64?) {
        let direction = packet.queue == self.upQueue ? 0 : 1
        let now = self.arrivals.arrival(direction: direction, stamp: packet.stamp, readAt: readAt, offset: offset)
        let up = direction == 0
        let segments = Int(packet.segments)
        self.working.directions[direction].packets += segments
        let tcp = packet.payload.flatMap { TCPHeader($0, copied: Int(packet.payload_length), length: Int(packet.length)) }
        let bytes = self.capture == nil ? nil : packet.payload.map { Array(UnsafeBufferPointer(start: $0, count: Int(packet.payload_length))) }
        if self.outage == .blackhole {
            // Followed all the same: an attempt the blackhole swallows is evidence too.
            if let tcp, self.flows.offered(tcp, up: up, at: now) { self.working.connections += 1 }
            self.drop(packet, bytes)
            self.working.directions[direction].outageDrops += segments
            return
        }
        if up, let gate = self.captiveGate, let payload = packet.payload,
            let stop = gate.decide(payload, copied: Int(packet.payload_length), tcp: tcp)
        {
            self.working.portalStopped += Int(packet.segments)
            if self.stopAttempt(packet, bytes, tcp: tcp, reset: stop == .reset, at: now), let payload = packet.payload {
                gate.onStop(stop, PacketCaptiveGate.target(payload, copied: Int(packet.payload_length), tcp: tcp))
            }
            return
        }
        if up, let action = self.firewall(packet, tcp) {
            self.working.firewallStopped += Int(packet.segments)
            self.stopAttempt(packet, bytes, tcp: tcp, reset: action == .refuse, at: now)
            return
        }
        if up, tcp == nil, !self.setup.dnsFail.isEmpty, self.answerFailingLookup(packet, at: now) {
            self.drop(packet, bytes)
            return
        }
        if let tcp {
            if up && tcp.isSYN && (self.outage == .refuse || self.outage == .reset) {
                // The far end turns the connection away: a reset one round trip after the SYN.
                self.drop(packet, bytes)
                self.working.refusedConnections += 1
                self.flows.refusedByLink(tcp, at: now)
                self.scheduleReset(
                    FlowKey(tcp, up: true), towardCage: true, at: now + self.conditions.baseRTT,
                    answering: tcp.seq &+ 1)
                return
            }
            if self.flows.offered(tcp, up: up, at: now) {
                self.working.connections += 1
                if up { self.countAttempt(tcp, at: now) }
            }
        }
        let extra = up ? self.setupDelay(packet, tcp, at: now) : .zero
        if self.stalled[direction] && self.stallBacklogIsFull(direction, adding: Int(packet.wire_length)) {
            self.drop(packet, bytes)
            self.working.directions[direction].queueDrops += segments
            return
        }
        let (fate, duplicate) = self.links[direction].decide(bytes: Int(packet.wire_length), at: now)
        let mark = packet.mark | PacketCage.passedBit
        switch fate {
        case .dropped(let why):
            self.drop(packet, bytes)
            switch why {
            case .lost: self.working.directions[direction].lost += segments
            case .queueFull: self.working.directions[direction].queueDrops += segments
            case .aqm: self.working.directions[direction].aqmDrops += segments
            }
        case .deliver(var at, let corruptByte):
            let link = up ? self.conditions.up : self.conditions.down
            if let tcp, let rate = link.connectionBandwidth {
                let limit: QueueLimit = link.queuePackets.map { .packets($0) } ?? .bytes(link.queue)
                guard let paced = self.pacers[direction].pace(
                    FlowKey(tcp, up: up), bytes: Int(packet.wire_length), deliveredAt: at, rate: rate, limit: limit)
                else {
                    self.drop(packet, bytes)
                    self.working.directions[direction].queueDrops += segments
                    return
                }
                at = paced
                if self.pacers[direction].count > 4096 { self.pacers[direction].forget(idleBefore: now - .seconds(Int64(10))) }
            }
            self.working.directions[direction].bytes += Int64(packet.wire_length)
            self.sequence += 1
            var held = HeldPacket(
                at: at + extra, sequence: self.sequence, queue: packet.queue, id: packet.id, mark: mark, tcp: tcp,
                bytes: bytes, length: packet.length)
            // A copy or a changed byte needs the whole packet (the queue hands it over whole then).
            if corruptByte != nil || duplicate != nil, packet.payload_length == packet.length, let payload = packet.payload {
                held.bytes = held.bytes ?? Array(UnsafeBufferPointer(start: payload, count: Int(packet.payload_length)))
                held.corruptByte = corruptByte  // counted when it is let go corrupted (``accept``)
                if duplicate != nil { held.duplicate = true }  // counted when the copy is made (``accept``)
            }
            if self.stalled[direction] {
                self.stallBacklog[direction].bytes += Int(packet.wire_length)
                self.stallBacklog[direction].packets += segments
            }
            if held.at > now {
                self.held.insert(held)
            } else if self.stalled[direction] {
                self.stalledPackets[direction].append(held)
            } else {
                self.releaseAfterStall(held, direction: direction, at: now)
            }
        }
    }

    /// A closed portal or the firewall stops a packet leaving the cage: a new connection's SYN is
    /// reset one round trip later (as a refusal) or lost; anything else is lost. Returns whether
    /// this was a new attempt (a swallowed SYN's retransmissions are the same one).
    @discardableResult
    private func stopAttempt(_ packet: ncq_packet, _ bytes: [UInt8]?, tcp: TCPHeader?, reset: Bool, at now: Instant) -> Bool {
        self.drop(packet, bytes)
        guard let tcp else { return false }
        if reset {
            self.flows.refusedByLink(tcp, at: now)
            self.scheduleReset(FlowKey(tcp, up: true), towardCage: true, at: now + self.conditions.baseRTT, answering: tcp.seq &+ 1)
            return true
        }
        guard self.flows.offered(tcp, up: true, at: now) else { return false }
        self.working.connections += 1
        return true
    }

    // MARK: - Set-up rules

    /// What the profile's firewall does to a packet leaving the cage (nil: it passes). It decides
    /// new TCP connections by their port (`refuse` or `blackhole`) and loses UDP to other ports;
    /// DNS (53) passes, as the proxy's own lookups do.
    private func firewall(_ packet: ncq_packet, _ tcp: TCPHeader?) -> FirewallAction? {
        guard let allowed = self.setup.allowPorts else { return nil }
        if let tcp {
            guard tcp.isSYN, tcp.destinationPort != 53, !allowed.contains(Int(tcp.destinationPort)) else { return nil }
            return self.setup.otherwise
        }
        guard let payload = packet.payload, let head = PacketHead(payload, copied: Int(packet.payload_length)),
            head.isUDP, let port = head.destinationPort, port != 53, !allowed.contains(Int(port))
        else { return nil }
        return .blackhole
    }

    /// A new connection from the cage: the first `connect_hold` ones wait before their handshake
    /// starts (every SYN of theirs arrives when the hold ends).
    private func countAttempt(_ tcp: TCPHeader, at now: Instant) {
        let index = self.connectAttempts
        self.connectAttempts += 1
        if self.setup.hold > .zero && index < self.setup.holdFirst {
            self.holdUntil[FlowKey(tcp, up: true)] = now + self.setup.hold
            self.working.connectsHeld += 1
        }
    }

    /// A DNS query for a name `dns_fail` names: answered NXDOMAIN in the server's place, a round
    /// trip (and the profile's DNS delay) later. Returns whether it was (then the query goes no further).
    private func answerFailingLookup(_ packet: ncq_packet, at now: Instant) -> Bool {
        guard packet.payload_length == packet.length, let payload = packet.payload else { return false }
        let bytes = Array(UnsafeBufferPointer(start: payload, count: Int(packet.payload_length)))
        guard let question = DNSFailure.question(bytes), self.setup.nameFails(question.name) else { return false }
        self.working.lookupsFailed += 1
        self.sequence += 1
        self.injected.insert(InjectedPacket(
            at: now + self.conditions.baseRTT + self.conditions.dnsDelay, sequence: self.sequence,
            bytes: DNSFailure.reply(to: bytes, question: question)))
        self.lookups.append(PacketLookupFailure(name: question.name, at: now))
        return true
    }

    /// Sends the packets netcond answers with in a server's place, when they are due.
    private func sendInjected(upTo now: Instant) {
        while let next = self.injected.min, next.at <= now {
            _ = self.injected.removeMin()
            self.copies.append(next.bytes)
        }
        self.sendCopies()
    }

    /// Lets a packet go: the link has delivered it (with a byte changed, and a copy behind it, when
    /// the link said so).
    private func accept(_ packet: HeldPacket) {
        var payload: [UInt8]?
        if let offset = packet.corruptByte, var bytes = packet.bytes {
            Self.corrupt(&bytes, offset: offset)
            payload = bytes
            // Counted here, not when decided: a packet still held when the run ends never reaches
            // its receiver corrupted, and the summary says what receivers' checksums discarded.
            self.working.directions[packet.queue == self.upQueue ? 0 : 1].corrupted += 1
        }
        self.queue.verdict(queue: packet.queue, id: packet.id, accept: true, mark: packet.mark, payload: payload)
        // A corrupted packet is discarded by its receiver: the flow table does not count it.
        if let tcp = packet.tcp, payload == nil { self.flows.delivered(tcp, up: packet.queue == self.upQueue) }
        if let capture = self.capture, let bytes = payload ?? packet.bytes {
            capture.write(bytes, length: packet.length, delivered: true, atMonotonic: ncq_now())
        }
        if packet.duplicate, let bytes = packet.bytes {
            self.copies.append(bytes)
            self.working.directions[packet.queue == self.upQueue ? 0 : 1].duplicated += 1
        }
    }

    /// Changes one bit of a whole packet past its IP header, after making its transport checksum
    /// right for the original: its receiver's checksum check then discards it, as it would a packet
    /// corrupted on a real path (the kernel counts it in `InCsumErrors`).
    static func corrupt(_ bytes: inout [UInt8], offset: Int) {
        let length = bytes.count
        var start = Int(bytes.withUnsafeMutableBufferPointer { ncq_fix_checksum($0.baseAddress!, UInt32(length)) })
        if start < 0 { start = bytes.first.map { $0 >> 4 == 6 ? 40 : Int($0 & 0x0f) * 4 } ?? 0 }
        guard length > start, start >= 0 else { return }
        let at = start + offset % (length - start)
        bytes[at] ^= UInt8(1) << UInt8(offset % 8)
    }

    /// Sends the copies the link duplicated (after the originals' verdicts: the copy arrives second).
    private func sendCopies() {
        for var bytes in self.copies {
            let length = UInt32(bytes.count)
            let result = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
                _ = ncq_fix_checksum(buffer.baseAddress!, length)
                return ncq_send_copy(buffer.first.map { $0 >> 4 == 6 } == true ? self.raw6 : self.raw4, buffer.baseAddress!, length)
            }
            if result != 0 {
                self.working.copiesNotSent += 1
            } else if let capture = self.capture {
                capture.write(bytes, length: length, delivered: true, atMonotonic: ncq_now())
            }
        }
        self.copies.removeAll(keepingCapacity: true)
    }

    /// The link lost a packet.
    private func drop(_ packet: ncq_packet, _ bytes: [UInt8]?) {
        self.queue.verdict(queue: packet.queue, id: packet.id, accept: false, mark: 0)
        if let capture = self.capture, capture.wantsDrops, let bytes {
            capture.write(bytes, length: packet.length, delivered: false, atMonotonic: ncq_now())
        }
    }

    // MARK: - Resets

    /// Cuts every TCP connection on the link with a reset to each end, as a middlebox that drops the
    /// connections would: each reset reaches its end after that direction's latency, with the
    /// sequence number the end expects then. Returns how many connections.
    @discardableResult
    private func cutConnections(at now: Instant) -> Int {
        let keys = self.flows.keys
        for key in keys {
            self.flows.markCut(key)
            self.scheduleReset(key, towardCage: true, at: now + self.conditions.down.latency)
            self.scheduleReset(key, towardCage: false, at: now + self.conditions.up.latency)
        }
        self.working.connectionsCut += keys.count
        return keys.count
    }

    /// `answering`: the reset answers a SYN (RST|ACK acknowledging it, sequence 0).
    private func scheduleReset(_ key: FlowKey, towardCage: Bool, at moment: Instant, answering syn: UInt32? = nil) {
        self.sequence += 1
        self.resets.insert(ScheduledReset(at: moment, sequence: self.sequence, key: key, towardCage: towardCage, answering: syn))
    }

    private func sendResets(upTo now: Instant) {
        while let next = self.resets.min, next.at <= now {
            _ = self.resets.removeMin()
            let key = next.key
            let seq: UInt32
            var ack: UInt32 = 0
            if let syn = next.answering {
                seq = 0
                ack = syn
            } else {
                guard let expected = self.flows.resetSequence(key, towardCage: next.towardCage) else {
                    self.flows.resetSent(key, towardCage: next.towardCage)
                    continue
                }
                seq = expected
                self.flows.resetSent(key, towardCage: next.towardCage)
            }
            let length = key.version == 6 ? 16 : 4
            let cage = key.cage.bytes(count: length)
            let far = key.far.bytes(count: length)
            let fd = key.version == 6 ? self.raw6 : self.raw4
            let (source, sourcePort, destination, destinationPort) =
                next.towardCage ? (far, key.farPort, cage, key.cagePort) : (cage, key.cagePort, far, key.farPort)
            var copy = [UInt8](repeating: 0, count: 60)
            var copied: UInt32 = 0
            let result = ncq_send_rst(
                fd, Int32(key.version), source, sourcePort, destination, destinationPort, seq, ack,
                next.answering == nil ? 0 : 1, &copy, &copied)
            if result != 0 {
                self.working.resetsNotSent += 1
            } else if let capture = self.capture {
                // The reset crossed the link (it was timed as if it had): it is in the capture.
                capture.write(Array(copy.prefix(Int(copied))), length: copied, delivered: true, atMonotonic: ncq_now())
            }
        }
    }

    /// The profile's extra set-up delays: `connect_delay` on a connection's first SYN, `dns_delay`
    /// on a query to port 53 (UDP or TCP). A TCP packet's header is already read (`tcp`).
    private func setupDelay(_ packet: ncq_packet, _ tcp: TCPHeader?, at now: Instant) -> Span {
        if let tcp {
            if tcp.destinationPort == 53 && self.conditions.dnsDelay > .zero { return self.conditions.dnsDelay }
            guard tcp.isSYN else { return .zero }
            var delay = self.conditions.connectDelay
            if !self.holdUntil.isEmpty, let until = self.holdUntil[FlowKey(tcp, up: true)] {
                if until > now { delay = max(delay, until - now) } else { self.holdUntil[FlowKey(tcp, up: true)] = nil }
            }
            return delay
        }
        guard self.conditions.dnsDelay > .zero, let bytes = packet.payload,
            let head = PacketHead(bytes, copied: Int(packet.payload_length)), head.isUDP
        else { return .zero }
        return head.destinationPort == 53 ? self.conditions.dnsDelay : .zero
    }

    private func release(upTo now: Instant) {
        while let next = self.held.min, next.at <= now {
            _ = self.held.removeMin()
            let late = now - next.at
            if late > self.working.maximumLateness { self.working.maximumLateness = late }
            if late > .milliseconds(1) { self.working.lateOverMillisecond += 1 }
            let direction = next.queue == self.upQueue ? 0 : 1
            if self.stalled[direction] {
                self.stalledPackets[direction].append(next)
                continue
            }
            self.releaseAfterStall(next, direction: direction, at: now)
        }
    }

    /// Whether a stalled direction's buffer has no room for `bytes` more (a link without a rate
    /// has no buffer to fill).
    private func stallBacklogIsFull(_ direction: Int, adding bytes: Int) -> Bool {
        let link = direction == 0 ? self.conditions.up : self.conditions.down
        guard link.bandwidth != nil else { return false }
        let backlog = self.stallBacklog[direction]
        if let packets = link.queuePackets { return backlog.packets >= packets }
        return backlog.packets > 0 && backlog.bytes + bytes > Int(link.queue.bytes)
    }

    /// Lets a packet go, at the link rate behind what a stall left waiting: a stalled radio drains
    /// its buffer at the link rate when it comes back, not at once.
    private func releaseAfterStall(_ packet: HeldPacket, direction: Int, at now: Instant) {
        guard let free = self.drainFree[direction],
            let rate = direction == 0 ? self.conditions.up.bandwidth : self.conditions.down.bandwidth
        else {
            self.accept(packet)
            return
        }
        if packet.at > free {
            // It comes after the backlog has drained: the link is as it was. (A packet of the
            // backlog put back in line comes at exactly `free`.)
            self.drainFree[direction] = nil
            self.accept(packet)
            return
        }
        if free > now {
            var later = packet
            later.at = free
            self.held.insert(later)
            return
        }
        self.accept(packet)
        self.drainFree[direction] = free + rate.transmissionTime(bytes: Int64(packet.length))
    }

    /// From now on the queues hand over whole packets (a duplicate, a corruption or `dns_fail` needs them).
    private func copyWholePackets() {
        guard !self.copyingWhole else { return }
        self.copyingWhole = true
        for number in [self.upQueue, self.upQueue &+ 1] { _ = ncq_set_copy(self.queue.descriptor, number, Self.wholePacket) }
    }

    /// Applies the timeline's changes due by `now`, one moment at a time.
    private func followTimeline(to now: Instant) {
        while let next = self.timeline.nextChange, next <= now {
            self.timeline.advance(to: next)
            self.applyTimeline(at: next)
        }
    }

    /// Brings the links in line with the timeline: conditions, outage, stalls; reports a new state.
    private func applyTimeline(at moment: Instant) {
        let conditions = self.timeline.conditions
        if conditions != self.conditions {
            self.conditions = conditions
            if Self.needsWholePackets(conditions, self.timeline.profile.setup) { self.copyWholePackets() }
            for (index, direction) in [conditions.up, conditions.down].enumerated() {
                self.links[index].reconfigure(PacketImpairments(direction))
                let whole = self.capture == nil && Self.decidesNothingPerPacket(direction)
                if whole != self.wholeGSO[index] {
                    self.wholeGSO[index] = whole
                    try? self.queue.setWholeGSO(whole, queue: self.upQueue &+ UInt16(index), waiting: false)
                }
            }
        }
        self.setup = self.timeline.profile.setup
        if !self.setup.dnsFail.isEmpty { self.copyWholePackets() }
        let outage = self.timeline.outage
        if outage != self.outage {
            self.outage = outage
            if outage == .reset { self.cutConnections(at: moment) }
        }
        for (index, direction) in Direction.allCases.enumerated() {
            let stalled = self.timeline.isStalled(direction)
            if self.stalled[index] && !stalled {
                // What waited through the stall leaves now, in order, at the link rate.
                self.stallBacklog[index] = (0, 0)
                self.drainFree[index] = moment
                for packet in self.stalledPackets[index] { self.releaseAfterStall(packet, direction: index, at: moment) }
                self.stalledPackets[index] = []
            }
            self.stalled[index] = stalled
        }
        let state = self.timeline.state
        if state != self.lastState {
            self.lastState = state
            self.onStateChange?(state, Span(nanoseconds: moment.nanoseconds))
        }
    }

    private func publish() {
        self.capture?.flush()
        self.working.vanished = Int(self.queue.errorReplies)
        self.working.connectionsOpen = self.flows.count
        self.working.state = self.timeline.state
        self.working.profile = self.timeline.profile.name
        self.lock.lock()
        self.published = self.working
        self.lock.unlock()
    }
}

/// A packet the kernel holds until the link delivers it.
struct HeldPacket: Comparable {
    var at: Instant
    var sequence: UInt64
    var queue: UInt16
    var id: UInt32
    var mark: UInt32
    /// Its TCP header, when it is TCP (the flow table follows what was delivered).
    var tcp: TCPHeader?
    /// Its bytes, when a capture is written or the link changes or copies it.
    var bytes: [UInt8]? = nil
    var length: UInt32 = 0
    /// The link changes a bit at this offset (see ``PacketEngine/corrupt(_:offset:)``).
    var corruptByte: Int? = nil
    /// The link delivers it twice.
    var duplicate = false

    static func < (a: HeldPacket, b: HeldPacket) -> Bool {
        (a.at, a.sequence) < (b.at, b.sequence)
    }

    static func == (a: HeldPacket, b: HeldPacket) -> Bool { a.sequence == b.sequence }
}

/// A DNS lookup `dns_fail` failed: the name, and when the query reached the link.
public struct PacketLookupFailure: Sendable, Equatable {
    public var name: String
    public var at: Instant
}

/// A packet netcond sends in a server's place at a moment.
struct InjectedPacket: Comparable {
    var at: Instant
    var sequence: UInt64
    var bytes: [UInt8]

    static func < (a: InjectedPacket, b: InjectedPacket) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
    static func == (a: InjectedPacket, b: InjectedPacket) -> Bool { a.sequence == b.sequence }
}

/// A reset netcond sends to one end of a connection at a moment.
struct ScheduledReset: Comparable {
    var at: Instant
    var sequence: UInt64
    var key: FlowKey
    var towardCage: Bool
    /// The acknowledgement of a refused SYN (the reset answers it), or nil for a cut.
    var answering: UInt32?

    static func < (a: ScheduledReset, b: ScheduledReset) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
    static func == (a: ScheduledReset, b: ScheduledReset) -> Bool { a.sequence == b.sequence }
}

/// What crossed the packet engine's link.
public struct PacketSummary: Sendable, Equatable {
    public struct Direction: Sendable, Equatable {
        /// Wire packets offered to the link (a GSO packet taken whole counts as its segments).
        public var packets = 0
        /// Bytes of the packets delivered.
        public var bytes: Int64 = 0
        public var lost = 0
        public var queueDrops = 0
        /// Dropped by CoDel at the head of the queue.
        public var aqmDrops = 0
        /// Delivered twice (`duplicate`), and delivered with a bit changed (`corrupt`).
        public var duplicated = 0
        public var corrupted = 0
        /// Dropped because a `blackhole` outage was in force.
        public var outageDrops = 0
    }
    public var directions = [Direction(), Direction()]
    public var up: Direction { self.directions[0] }
    public var down: Direction { self.directions[1] }
    /// Packets the kernel dropped while netcond held them (its answer to their verdict was "no such
    /// packet"): another program changed the firewall, which flushes every NFQUEUE.
    public var vanished = 0
    /// TCP connections seen starting (either way).
    public var connections = 0
    /// TCP connections followed now (open, as far as the link has seen).
    public var connectionsOpen = 0
    /// Packets the kernel dropped because netcond could not read them fast enough.
    public var kernelDrops = 0
    /// Connections refused by a `refuse` or `reset` outage (their SYN answered with a reset).
    public var refusedConnections = 0
    /// Connections cut by a `reset` outage or `netcond ctl cut`: a reset sent to each end.
    public var connectionsCut = 0
    /// Packets a closed captive portal stopped (connections it reset or swallowed, UDP, pings).
    public var portalStopped = 0
    /// Packets the profile's firewall stopped; connections `connect_hold` held; DNS queries
    /// answered NXDOMAIN for `dns_fail`.
    public var firewallStopped = 0
    public var connectsHeld = 0
    public var lookupsFailed = 0
    /// Duplicates the raw socket could not send.
    public var copiesNotSent = 0
    /// Resets the raw socket could not send.
    public var resetsNotSent = 0
    /// The latest a verdict was sent after its moment, and how many were over 1 ms late.
    public var maximumLateness = Span.zero
    public var lateOverMillisecond = 0
    public var elapsed = Span.zero
    /// Why the command's TCP sockets kept loopback's MSS (``PacketCage/pathMSSProblem``), or nil.
    public var pathMSSProblem: String?
    /// The link's state and the profile in force (live control can switch it).
    public var state = LinkState(phase: "")
    public var profile = ""
}

/// A change to the running packet link (`netcond ctl`, the control API).
public enum PacketCommand: Sendable {
    case switchProfile(Profile)
    case outage(OutageBehaviour?)
    case stall(StallDirection?)
    /// Reset every TCP connection on the link, once.
    case cut
}
