import NetcondCore

/// An address of either family, as 16 bytes (IPv4 in the first 4).
struct PacketAddress: Hashable {
    var high: UInt64 = 0
    var low: UInt64 = 0

    init(_ bytes: UnsafePointer<UInt8>, count: Int) {
        for index in 0..<count {
            if index < 8 {
                self.high |= UInt64(bytes[index]) << (56 - 8 * UInt64(index))
            } else {
                self.low |= UInt64(bytes[index]) << (56 - 8 * UInt64(index - 8))
            }
        }
    }

    init(_ bytes: [UInt8]) {
        self = bytes.withUnsafeBufferPointer { PacketAddress($0.baseAddress!, count: bytes.count) }
    }

    func bytes(count: Int) -> [UInt8] {
        (0..<count).map { index -> UInt8 in
            let word = index < 8 ? self.high : self.low
            let shift = UInt64(56 - 8 * (index % 8))
            return UInt8(truncatingIfNeeded: word >> shift)
        }
    }
}

/// What the packet engine reads of a TCP packet: addresses, ports, sequence numbers and flags, from
/// the copied head of the packet (IPv4 or IPv6 without extension headers).
struct TCPHeader: Equatable {
    var version: UInt8
    var source: PacketAddress
    var destination: PacketAddress
    var sourcePort: UInt16
    var destinationPort: UInt16
    var seq: UInt32
    var ack: UInt32
    var flags: UInt8
    /// Sequence space the packet takes: payload bytes, plus one for a SYN and one for a FIN.
    var span: UInt32

    static let fin: UInt8 = 0x01
    static let syn: UInt8 = 0x02
    static let rst: UInt8 = 0x04
    static let ackFlag: UInt8 = 0x10

    var isSYN: Bool { self.flags & Self.syn != 0 && self.flags & Self.ackFlag == 0 }
    var isRST: Bool { self.flags & Self.rst != 0 }
    var addressLength: Int { self.version == 6 ? 16 : 4 }

    /// Nil for anything but TCP over IPv4 or IPv6 (no extension headers), or a head too short.
    /// `length` is the packet's whole length (a GSO packet's: all of its segments).
    init?(_ bytes: UnsafePointer<UInt8>, copied: Int, length: Int) {
        guard copied >= 20 else { return nil }
        let version = bytes[0] >> 4
        let header: Int
        if version == 4 {
            header = Int(bytes[0] & 0x0f) * 4
            guard bytes[9] == 6, header >= 20 else { return nil }
            self.source = PacketAddress(bytes + 12, count: 4)
            self.destination = PacketAddress(bytes + 16, count: 4)
        } else if version == 6 {
            header = 40
            guard copied >= 40, bytes[6] == 6 else { return nil }
            self.source = PacketAddress(bytes + 8, count: 16)
            self.destination = PacketAddress(bytes + 24, count: 16)
        } else {
            return nil
        }
        guard copied >= header + 20 else { return nil }
        let tcp = bytes + header
        func u16(_ at: Int) -> UInt16 { UInt16(tcp[at]) << 8 | UInt16(tcp[at + 1]) }
        func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) << 16 | UInt32(u16(at + 2)) }
        self.version = version
        self.sourcePort = u16(0)
        self.destinationPort = u16(2)
        self.seq = u32(4)
        self.ack = u32(8)
        self.flags = tcp[13]
        let dataOffset = Int(tcp[12] >> 4) * 4
        let payload = max(0, length - header - dataOffset)
        self.span =
            UInt32(truncatingIfNeeded: payload) + (self.flags & Self.syn != 0 ? 1 : 0)
            + (self.flags & Self.fin != 0 ? 1 : 0)
    }
}

/// One TCP connection between the cage and a far end, as the link has seen it.
struct FlowKey: Hashable {
    var version: UInt8
    var cage: PacketAddress
    var cagePort: UInt16
    var far: PacketAddress
    var farPort: UInt16

    /// The key of a packet going `up` (from the cage) or down (to it).
    init(_ header: TCPHeader, up: Bool) {
        self.version = header.version
        self.cage = up ? header.source : header.destination
        self.cagePort = up ? header.sourcePort : header.destinationPort
        self.far = up ? header.destination : header.source
        self.farPort = up ? header.destinationPort : header.sourcePort
    }
}

/// What the link saw of one TCP connection, for a scenario's evidence: when it started, whether it
/// was made, how many of the far end's bytes reached the cage, and how it ended.
public struct PacketFlowRecord: Sendable, Equatable {
    public var version: UInt8
    /// The cage's port (the far end sees it as its peer's) and the far end's address and port.
    public var cagePort: UInt16
    public var farAddress: [UInt8]
    public var farPort: UInt16
    /// The cage opened it (else the far end did).
    public var fromCage: Bool
    /// When its first SYN reached the link, on the engine's clock.
    public var startedAt: Instant
    /// Its SYNs offered to the link (retransmissions included).
    public var syns = 1
    /// The handshake's SYN-ACK reached the side that opened it.
    public var established = false
    /// The far end's payload bytes the link delivered to the cage, in order.
    public var farBytesDelivered: Int64 = 0
    /// A reset ended it: the far end's answer to a SYN (refused), netcond's refusal in an outage,
    /// netcond's cut, or either end's own.
    public var refused = false
    public var cutByLink = false
    public var resetSeen = false
    /// When the cage's FIN reached the link, on the engine's clock.
    public var cageFINAt: Instant?
}

/// The TCP connections crossing the packet link, followed far enough to cut them with a reset each
/// end accepts: RFC 5961 (Linux) takes a RST only when its sequence number is exactly the next one
/// the receiver expects, so the table follows, for each side, the sequence space the link has
/// delivered to the other (contiguously) and the last acknowledgement that side sent.
struct TCPFlowTable {
    struct Flow {
        /// The cage's next sequence number as delivered to the far end (contiguous), and the far end's.
        var cageDelivered: UInt32?
        var farDelivered: UInt32?
        /// The last acknowledgement each side sent (what it had received then).
        var cageAck: UInt32?
        var farAck: UInt32?
        var lastSeen: Instant
        /// Cut: resets still to send (it is forgotten once both are gone).
        var resetsPending = 0
        /// The far end's initial sequence number, once its SYN was seen.
        var farISN: UInt32?
        /// The sequence number just past the far end's FIN, once it was sent.
        var farFINEnd: UInt32?
        /// A cut's reset has reached that side: what the link delivers to it afterwards meets a
        /// closed socket and counts for nothing.
        var cageReset = false
        var farReset = false
        var record: PacketFlowRecord
    }

    private(set) var flows: [FlowKey: Flow] = [:]
    /// Records of connections no longer followed, oldest first (at most ``recordLimit``).
    private(set) var finished: [PacketFlowRecord] = []
    static let recordLimit = 100_000

    /// Every connection's record: those that ended, then those still followed.
    var records: [PacketFlowRecord] {
        self.finished + self.flows.values.map(\.record).sorted { $0.startedAt < $1.startedAt }
    }

    private mutating func end(_ key: FlowKey) {
        guard let flow = self.flows.removeValue(forKey: key) else { return }
        if self.finished.count >= Self.recordLimit { self.finished.removeFirst(Self.recordLimit / 10) }
        self.finished.append(flow.record)
    }
    /// Most connections followed at once; beyond, those idle longest are forgotten.
    static let limit = 65_536

    /// A packet offered to the link (`up`: from the cage). A SYN starts a flow; a RST either way
    /// ends it. Returns true when the packet started one.
    @discardableResult
    mutating func offered(_ header: TCPHeader, up: Bool, at now: Instant) -> Bool {
        let key = FlowKey(header, up: up)
        if header.isRST {
            if var flow = self.flows[key] {
                flow.record.resetSeen = true
                // A reset answering the opener's SYN: the far end refused the connection.
                if !flow.record.established && up != flow.record.fromCage { flow.record.refused = true }
                self.flows[key] = flow
                self.end(key)
            }
            return false
        }
        var started = false
        var index = self.flows.index(forKey: key)
        if index == nil {
            guard header.flags & TCPHeader.syn != 0, header.flags & TCPHeader.ackFlag == 0 else { return false }
            if self.flows.count >= Self.limit { self.forgetIdle(now: now) }
            self.flows[key] = Flow(lastSeen: now, record: Self.record(key, fromCage: up, at: now, syns: 0))
            index = self.flows.index(forKey: key)
            started = true
        }
        // One look-up a packet: the flow is changed where it is stored.
        Self.observe(header, up: up, at: now, &self.flows.values[index!])
        return started
    }

    /// What a packet offered to the link tells about its flow.
    private static func observe(_ header: TCPHeader, up: Bool, at now: Instant, _ flow: inout Flow) {
        flow.lastSeen = now
        if header.flags & TCPHeader.syn != 0 {
            if header.flags & TCPHeader.ackFlag == 0 { flow.record.syns += 1 }
            if !up { flow.farISN = header.seq }
        }
        if up && header.flags & TCPHeader.fin != 0 && flow.record.cageFINAt == nil {
            flow.record.cageFINAt = now
        }
        if !up && header.flags & TCPHeader.fin != 0 { flow.farFINEnd = header.seq &+ header.span }
        if header.flags & TCPHeader.ackFlag != 0 {
            if up { flow.cageAck = header.ack } else { flow.farAck = header.ack }
            // What a side acknowledges reached it: past a hole the link's delivered edge stops at
            // the hole (the segments after it are not followed one by one), and the receiver's
            // acknowledgement of the repair carries it past them.
            if header.flags & TCPHeader.syn == 0 {
                let next = up ? flow.farDelivered : flow.cageDelivered
                if let next, Self.serial(next, lessThan: header.ack) {
                    Self.setDelivered(&flow, up: !up, header.ack)
                    Self.countFarBytes(&flow)
                }
            }
        }
    }

    /// Connections followed now.
    var count: Int { self.flows.count }

    private static func record(_ key: FlowKey, fromCage: Bool, at now: Instant, syns: Int = 1) -> PacketFlowRecord {
        PacketFlowRecord(
            version: key.version, cagePort: key.cagePort, farAddress: key.far.bytes(count: key.version == 6 ? 16 : 4),
            farPort: key.farPort, fromCage: fromCage, startedAt: now, syns: syns)
    }

    /// A packet the link delivered (accepted): its sequence space reached the other side.
    mutating func delivered(_ header: TCPHeader, up: Bool) {
        guard let index = self.flows.index(forKey: FlowKey(header, up: up)) else { return }
        Self.deliver(header, up: up, &self.flows.values[index])
    }

    private static func deliver(_ header: TCPHeader, up: Bool, _ flow: inout Flow) {
        guard !(up ? flow.farReset : flow.cageReset) else { return }
        let end = header.seq &+ header.span
        let next = up ? flow.cageDelivered : flow.farDelivered
        if header.flags & TCPHeader.syn != 0 {
            if next == nil { Self.setDelivered(&flow, up: up, end) }
            // The SYN-ACK reached the opener: the connection is made.
            if header.flags & TCPHeader.ackFlag != 0 && up != flow.record.fromCage { flow.record.established = true }
        } else if let next, Self.serial(header.seq, atMost: next), Self.serial(next, lessThan: end) {
            Self.setDelivered(&flow, up: up, end)
        }
        if !up { Self.countFarBytes(&flow) }
    }

    /// The far end's bytes that reached the cage, in order (its SYN and FIN take no byte).
    private static func countFarBytes(_ flow: inout Flow) {
        guard let isn = flow.farISN, let delivered = flow.farDelivered else { return }
        let finCounted = flow.farFINEnd.map { Self.serial($0, atMost: delivered) } ?? false
        let bytes = Int64(delivered &- isn &- 1) - (finCounted ? 1 : 0)
        flow.record.farBytesDelivered = max(flow.record.farBytesDelivered, max(0, bytes))
    }

    private static func setDelivered(_ flow: inout Flow, up: Bool, _ value: UInt32) {
        if up { flow.cageDelivered = value } else { flow.farDelivered = value }
    }

    /// The sequence number each end accepts a RST at now: the next one it expects from the other,
    /// the later of what the link delivered to it and what it last acknowledged. Nil when unknown
    /// (the handshake has not reached it).
    func resetSequence(_ key: FlowKey, towardCage: Bool) -> UInt32? {
        guard let flow = self.flows[key] else { return nil }
        let delivered = towardCage ? flow.farDelivered : flow.cageDelivered
        let acknowledged = towardCage ? flow.cageAck : flow.farAck
        switch (delivered, acknowledged) {
        case (let d?, let a?): return Self.serial(d, lessThan: a) ? a : d
        case (let d?, nil): return d
        case (nil, let a?): return a
        case (nil, nil): return nil
        }
    }

    /// The connections open now (not already being cut).
    var keys: [FlowKey] { self.flows.filter { $0.value.resetsPending == 0 }.map(\.key) }

    /// The sequence number just past the cage's SYN of connection `key` (its initial sequence
    /// number + 1), when the connection's first delivered bytes from the cage say it; else nil.
    func synEnd(of key: FlowKey) -> UInt32? {
        guard let flow = self.flows[key], flow.record.syns > 0, !flow.record.established else { return nil }
        return flow.cageDelivered
    }

    /// A connection being cut: a reset goes to each end, then it is forgotten.
    mutating func markCut(_ key: FlowKey) {
        self.flows[key]?.resetsPending = 2
        self.flows[key]?.record.cutByLink = true
    }

    /// One of a cut connection's resets went (toward the cage, or the far end).
    mutating func resetSent(_ key: FlowKey, towardCage: Bool) {
        guard let flow = self.flows[key] else { return }
        if towardCage { self.flows[key]!.cageReset = true } else { self.flows[key]!.farReset = true }
        if flow.resetsPending <= 1 { self.end(key) } else { self.flows[key]!.resetsPending -= 1 }
    }

    /// A SYN from the cage netcond refused (an outage): the record of an attempt that was refused.
    mutating func refusedByLink(_ header: TCPHeader, at now: Instant) {
        let key = FlowKey(header, up: true)
        if self.flows[key] == nil {
            self.flows[key] = Flow(lastSeen: now, record: Self.record(key, fromCage: true, at: now))
        } else {
            self.flows[key]!.record.syns += 1
        }
        self.flows[key]!.record.refused = true
        self.end(key)
    }

    private mutating func forgetIdle(now: Instant) {
        let oldest = self.flows.sorted { $0.value.lastSeen < $1.value.lastSeen }.prefix(Self.limit / 4)
        for (key, _) in oldest { self.end(key) }
    }

    /// Sequence-number order (RFC 1982): a before b within half the space.
    static func serial(_ a: UInt32, lessThan b: UInt32) -> Bool { Int32(bitPattern: b &- a) > 0 }
    static func serial(_ a: UInt32, atMost b: UInt32) -> Bool { a == b || Self.serial(a, lessThan: b) }
}
