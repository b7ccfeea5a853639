/// Turns a packet capture of a saturating download into a trace of the path it crossed
/// (`netcond trace record`): the delivery opportunities the receiver's arrivals show, the one-way
/// delays the handshake shows, the loss the sequence holes show, and where the download did not
/// fill the path (idle stretches, which would replay as no capacity).
///
/// ```
///  arrivals (down):  ▮1500  ▮1500 ▮▮▮▮▮▮ 9000 (GRO)      ▮1500     running bytes cross 1500·k
///  t (ms):           0      1     3                     7
///  trace:            0      1     3 3 3 3 3 3           7         one line per 1500-byte boundary
///
///  handshake:  SYN t1 ──▶ SYN-ACK t2 ──▶ ACK t3    round trip t3 − t1; split t2−t1 / t3−t2 when mid-link
///  sequence:   [1000..2448)[2448..3896)   [5344..)   hole of 1448 bytes: 1 packet lost
/// ```
/// Fed one captured record at a time (``add(_:source:)``), it keeps about 32 bytes per TCP packet and
/// never the packets themselves.
public struct TraceRecorder {
    /// What the analysis keeps of one TCP packet.
    struct FlowPacket {
        /// Nanoseconds since the capture's first packet.
        var time: Int64
        var sequence: UInt32
        var acknowledgement: UInt32
        var payload: Int32
        var ipLength: Int32
        var flags: CapturedSegment.Flags
        /// Sent by the flow's lower endpoint (`FlowKey.a`).
        var fromA: Bool
    }

    /// A TCP connection: its two endpoints, the lower first.
    struct FlowKey: Hashable {
        var a: CapturedSegment.Endpoint
        var b: CapturedSegment.Endpoint
    }

    struct Flow {
        var key: FlowKey
        var packets: [FlowPacket] = []
    }

    private var flows: [Flow] = []
    private var index: [FlowKey: Int] = [:]
    private var firstTimestamp: Int64?
    private var lastTime: Int64 = 0
    /// Packets read, and TCP segments among them.
    private(set) var records = 0
    private(set) var tcpPackets = 0

    public init() {}

    /// Reads every record of `capture` and analyses it.
    public static func record(_ capture: inout PacketCaptureFile, options: Options) throws(TraceRecordError)
        -> TraceRecording
    {
        var recorder = TraceRecorder()
        do {
            while let record = try capture.next() {
                try recorder.add(record, source: capture.source)
            }
        } catch {
            throw .capture(error)
        }
        return try recorder.finish(options, source: capture.source)
    }

    /// Takes one captured packet in.
    public mutating func add(_ record: PacketCaptureFile.Record, source: String) throws(PacketCaptureFile.ReadError) {
        guard CapturedSegment.isSupported(linkType: record.linkType) else {
            throw PacketCaptureFile.ReadError(
                source: source,
                message:
                    "packet \(record.number) at byte \(record.offset) has link type \(record.linkType), which is not read; "
                    + "allowed: \(CapturedSegment.allowedLinkTypes)")
        }
        self.records += 1
        let first = self.firstTimestamp ?? record.timestamp
        self.firstTimestamp = first
        let time = record.timestamp - first
        self.lastTime = max(self.lastTime, time)
        guard
            let segment = CapturedSegment.decode(
                linkType: record.linkType, bytes: record.bytes, originalLength: record.originalLength)
        else { return }
        self.tcpPackets += 1
        let fromA = segment.source < segment.destination || segment.source == segment.destination
        let key =
            fromA
            ? FlowKey(a: segment.source, b: segment.destination) : FlowKey(a: segment.destination, b: segment.source)
        let slot: Int
        if let known = self.index[key] {
            slot = known
        } else {
            slot = self.flows.count
            self.index[key] = slot
            self.flows.append(Flow(key: key))
        }
        self.flows[slot].packets.append(
            FlowPacket(
                time: time, sequence: segment.sequence, acknowledgement: segment.acknowledgement,
                payload: Int32(clamping: segment.payloadLength), ipLength: Int32(clamping: segment.ipLength),
                flags: segment.flags, fromA: fromA))
    }

    // MARK: - Analysis

    /// What to record: which direction, and which part of the capture (seconds from its first packet).
    public struct Options: Sendable, Equatable {
        public var direction: Direction
        public var from: Span?
        public var to: Span?

        public init(direction: Direction = .down, from: Span? = nil, to: Span? = nil) {
            self.direction = direction
            self.from = from
            self.to = to
        }
    }

    /// The flow's two sides as the analysis sees them.
    struct Sides {
        /// The client is endpoint `a`.
        var clientIsA: Bool
        /// How the client was told.
        var bySYN: Bool
        func isClient(_ packet: FlowPacket) -> Bool { packet.fromA == self.clientIsA }
    }

    static func sides(of flow: Flow) -> Sides {
        if let syn = flow.packets.first(where: { $0.flags.contains(.syn) && !$0.flags.contains(.ack) }) {
            return Sides(clientIsA: syn.fromA, bySYN: true)
        }
        if let synAck = flow.packets.first(where: { $0.flags.contains(.syn) && $0.flags.contains(.ack) }) {
            return Sides(clientIsA: !synAck.fromA, bySYN: true)
        }
        var bytesFromA: Int64 = 0
        var bytesFromB: Int64 = 0
        for packet in flow.packets {
            if packet.fromA { bytesFromA += Int64(packet.payload) } else { bytesFromB += Int64(packet.payload) }
        }
        return Sides(clientIsA: bytesFromA <= bytesFromB, bySYN: false)
    }

    /// Analyses what was added.
    public func finish(_ options: Options, source: String) throws(TraceRecordError) -> TraceRecording {
        let duration = Span(nanoseconds: self.lastTime)
        if let from = options.from, from < .zero {
            throw .window("--from \(Self.seconds(from)) is negative; give seconds from the capture's first packet")
        }
        if let to = options.to, to <= .zero {
            throw .window(
                "--to \(Self.seconds(to)) is not after the capture's start; give seconds from its first packet")
        }
        if let from = options.from, let to = options.to, from >= to {
            throw .window("--from \(Self.seconds(from)) is not before --to \(Self.seconds(to))")
        }
        if let from = options.from, from.nanoseconds > 0, from >= duration {
            throw .window("--from \(Self.seconds(from)) is beyond the capture, which lasts \(Self.seconds(duration)) s")
        }
        if let to = options.to, to.nanoseconds - duration.nanoseconds >= 1_000_000 {
            throw .window("--to \(Self.seconds(to)) is beyond the capture, which lasts \(Self.seconds(duration)) s")
        }
        let low = options.from?.nanoseconds ?? 0
        let high = options.to?.nanoseconds ?? Int64.max
        guard self.tcpPackets > 0 else {
            throw .unusable("\(source): no TCP packets in the capture (\(self.records) packets read)")
        }
        // The connection that carried the most payload in the chosen direction within the window.
        var best: (flow: Int, sides: Sides, bytes: Int64)?
        for (number, flow) in self.flows.enumerated() {
            let sides = Self.sides(of: flow)
            var bytes: Int64 = 0
            for packet in flow.packets
            where Self.isData(packet, sides, options.direction) && packet.time >= low && packet.time <= high {
                bytes += Int64(packet.payload)
            }
            if bytes > (best?.bytes ?? 0) { best = (number, sides, bytes) }
        }
        guard let best else {
            let other = options.direction == .down ? "up" : "down"
            throw .unusable(
                "\(source): no data packets in the chosen direction (\(options.direction), toward the "
                    + "\(options.direction == .down ? "client" : "server")) in \(self.tcpPackets) TCP packets of "
                    + "\(self.flows.count) connection\(self.flows.count == 1 ? "" : "s")"
                    + (options.from != nil || options.to != nil ? " within the window" : "")
                    + "; try --direction \(other)")
        }
        let flow = self.flows[best.flow]
        return try Analysis(flow: flow, sides: best.sides, options: options, source: source, duration: duration)
            .recording(records: self.records, tcpPackets: self.tcpPackets, connections: self.flows.count)
    }

    static func isData(_ packet: FlowPacket, _ sides: Sides, _ direction: Direction) -> Bool {
        // Down: toward the client, so sent by the server.
        packet.payload > 0 && self.isSender(packet, sides, direction)
    }

    static func seconds(_ span: Span) -> String { formatTrimmed(span.seconds) }
}

/// Why a capture cannot be recorded: the file (exit 1), the window asked for (a usage error), or
/// nothing a trace can be made of in it (exit 1).
public enum TraceRecordError: Error, Sendable, Equatable, CustomStringConvertible {
    case capture(PacketCaptureFile.ReadError)
    case window(String)
    case unusable(String)

    public var description: String {
        switch self {
        case .capture(let error): return error.description
        case .window(let message), .unusable(let message): return message
        }
    }
}

/// 32-bit sequence numbers compared as TCP compares them (RFC 1982): across the wrap, 5 is after 4294967290.
enum SequenceNumber {
    static func after(_ a: UInt32, _ b: UInt32) -> Bool { Int32(bitPattern: a &- b) > 0 }
}
