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
        self.span = UInt32(truncatingIfNeeded: payload) + (self.flags & Self.syn != 0 ? 1 : 0) + (self.flags & Self.fin != 0 ? 1 : 0)
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
    }

    private(set) var flows: [FlowKey: Flow] = [:]
    /// Most connections followed at once; beyond, those idle longest are forgotten.
    static let limit = 65_536

    /// A packet offered to the link (`up`: from the cage). A SYN starts a flow; a RST either way
    /// ends it. Returns true when the packet started one.
    @discardableResult
    mutating func offered(_ header: TCPHeader, up: Bool, at now: Instant) -> Bool {
        let key = FlowKey(header, up: up)
        if header.isRST {
            self.flows[key] = nil
            return false
        }
        var started = false
        if self.flows[key] == nil {
            guard header.flags & TCPHeader.syn != 0 else { return false }
            if self.flows.count >= Self.limit { self.forgetIdle(now: now) }
            self.flows[key] = Flow(lastSeen: now)
            started = true
        }
        self.flows[key]!.lastSeen = now
        if header.flags & TCPHeader.ackFlag != 0 {
            if up { self.flows[key]!.cageAck = header.ack } else { self.flows[key]!.farAck = header.ack }
        }
        return started
    }

    /// Connections followed now.
    var count: Int { self.flows.count }

    /// A packet the link delivered (accepted): its sequence space reached the other side.
    mutating func delivered(_ header: TCPHeader, up: Bool) {
        let key = FlowKey(header, up: up)
        guard var flow = self.flows[key] else { return }
        let end = header.seq &+ header.span
        let next = up ? flow.cageDelivered : flow.farDelivered
        if header.flags & TCPHeader.syn != 0 {
            if next == nil { self.setDelivered(&flow, up: up, end) }
        } else if let next, Self.serial(header.seq, atMost: next), Self.serial(next, lessThan: end) {
            self.setDelivered(&flow, up: up, end)
        }
        self.flows[key] = flow
    }

    private func setDelivered(_ flow: inout Flow, up: Bool, _ value: UInt32) {
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

    /// A connection being cut: a reset goes to each end, then it is forgotten.
    mutating func markCut(_ key: FlowKey) { self.flows[key]?.resetsPending = 2 }

    /// One of a cut connection's resets went.
    mutating func resetSent(_ key: FlowKey) {
        guard let flow = self.flows[key] else { return }
        if flow.resetsPending <= 1 { self.flows[key] = nil } else { self.flows[key]!.resetsPending -= 1 }
    }

    private mutating func forgetIdle(now: Instant) {
        let oldest = self.flows.sorted { $0.value.lastSeen < $1.value.lastSeen }.prefix(Self.limit / 4)
        for (key, _) in oldest { self.flows[key] = nil }
    }

    /// Sequence-number order (RFC 1982): a before b within half the space.
    static func serial(_ a: UInt32, lessThan b: UInt32) -> Bool { Int32(bitPattern: b &- a) > 0 }
    static func serial(_ a: UInt32, atMost b: UInt32) -> Bool { a == b || Self.serial(a, lessThan: b) }
}
