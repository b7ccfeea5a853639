/// What a tcptrace time–sequence graph (Wireshark's "Stevens" graph) shows of each TCP connection
/// in a capture: for the direction that carried the data, every data segment (its sequence range
/// at its moment, retransmissions told apart), the receiver's cumulative acknowledgements and the
/// right edge of its advertised window, and, from a second capture of what the link dropped
/// (`--pcap-drops`), the segments the link decided to lose.
///
/// ```
///  sequence ▲            window ┄┄┄┄┄┄┄┄┄┌┄┄┄┄
///           │        ┌┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┘      │ data segment (its bytes)
///           │   ┌┄┄┄┄┘            │ │ │ ✕ ┃    ┃ retransmission
///           │   │  │ │ │ │ │ │ │ ┌┘─┘─┘      ✕ dropped by the link
///           │ │ │ ─┘─┘─┘─┘─┘─┘─┘ ack
///           └──────────────────────────────────▶ time
/// ```
/// Sequence numbers are relative to the sender's initial one (its SYN's, or the first seen) and
/// unwrapped past 4 GB. A window is scaled by the receiver's SYN option when the capture holds it.
public struct TimeSequence: Sendable, Equatable {
    /// A data segment (or one the link dropped): when, and its bytes [start, end) in the sender's
    /// relative sequence space.
    public struct Segment: Sendable, Equatable {
        public var at: Double
        public var start: Int64
        public var end: Int64
        /// It carried bytes sent before (a retransmission).
        public var retransmission: Bool

        public init(at: Double, start: Int64, end: Int64, retransmission: Bool) {
            self.at = at
            self.start = start
            self.end = end
            self.retransmission = retransmission
        }
    }

    /// A moment the receiver acknowledged `ack` and could take bytes up to `window`.
    public struct Acknowledgement: Sendable, Equatable {
        public var at: Double
        public var ack: Int64
        /// `ack` plus the advertised window (nil when the capture cut it off).
        public var window: Int64?

        public init(at: Double, ack: Int64, window: Int64?) {
            self.at = at
            self.ack = ack
            self.window = window
        }
    }

    /// A SYN, FIN or RST of either side.
    public struct Flag: Sendable, Equatable {
        public var at: Double
        public var kind: String
        public var fromSender: Bool

        public init(at: Double, kind: String, fromSender: Bool) {
            self.at = at
            self.kind = kind
            self.fromSender = fromSender
        }
    }

    public struct Connection: Sendable, Equatable {
        /// The side whose data is drawn, and the other.
        public var sender: CapturedSegment.Endpoint
        public var receiver: CapturedSegment.Endpoint
        /// Nanoseconds since the epoch of its first packet: `at` values are seconds from here.
        public var startedAt: Int64
        public var duration: Double
        public var segments: [Segment] = []
        public var acknowledgements: [Acknowledgement] = []
        public var dropped: [Segment] = []
        public var flags: [Flag] = []
        /// The receiver's window scale came from its SYN (else windows are drawn unscaled).
        public var windowScaleKnown = false
        /// Segments and acknowledgements left out past ``maxPoints``.
        public var leftOut = 0

        public init(
            sender: CapturedSegment.Endpoint, receiver: CapturedSegment.Endpoint, startedAt: Int64, duration: Double
        ) {
            self.sender = sender
            self.receiver = receiver
            self.startedAt = startedAt
            self.duration = duration
        }

        public var bytes: Int64 { self.segments.map(\.end).max() ?? 0 }
        public var retransmissions: Int { self.segments.filter(\.retransmission).count }
    }

    /// At most this many segments and as many acknowledgements kept per connection.
    public static let maxPoints = 50_000

    public var connections: [Connection]
    /// Packets of the capture that were not TCP over IP.
    public var otherPackets: Int

    public init(connections: [Connection], otherPackets: Int) {
        self.connections = connections
        self.otherPackets = otherPackets
    }

    /// Reads `capture` (and `drops`, what the link dropped) into one graph per connection, the
    /// largest first.
    public static func read(capture: String, drops: String? = nil) throws(PacketCaptureFile.ReadError) -> TimeSequence {
        var file = try PacketCaptureFile(path: capture, source: capture)
        var records: [PacketCaptureFile.Record] = []
        while let record = try file.next() { records.append(record) }
        var dropped: [PacketCaptureFile.Record] = []
        if let drops {
            var file = try PacketCaptureFile(path: drops, source: drops)
            while let record = try file.next() { dropped.append(record) }
        }
        return Self.build(records, dropped: dropped)
    }

    /// The graphs of the packets of a capture (and of a capture of drops).
    public static func build(_ records: [PacketCaptureFile.Record], dropped: [PacketCaptureFile.Record] = [])
        -> TimeSequence
    {
        struct Key: Hashable {
            var a: CapturedSegment.Endpoint
            var b: CapturedSegment.Endpoint
            init(_ segment: CapturedSegment) {
                (self.a, self.b) =
                    segment.source < segment.destination
                    ? (segment.source, segment.destination) : (segment.destination, segment.source)
            }
        }
        var packets: [Key: [(at: Int64, segment: CapturedSegment)]] = [:]
        var order: [Key] = []
        var other = 0
        for record in records {
            guard
                let segment = CapturedSegment.decode(
                    linkType: record.linkType, bytes: record.bytes, originalLength: record.originalLength)
            else {
                other += 1
                continue
            }
            let key = Key(segment)
            if packets[key] == nil { order.append(key) }
            packets[key, default: []].append((record.timestamp, segment))
        }
        var drops: [Key: [(at: Int64, segment: CapturedSegment)]] = [:]
        for record in dropped {
            guard
                let segment = CapturedSegment.decode(
                    linkType: record.linkType, bytes: record.bytes, originalLength: record.originalLength)
            else { continue }
            drops[Key(segment), default: []].append((record.timestamp, segment))
        }
        let connections = order.compactMap { key in
            Self.connection(packets[key] ?? [], dropped: drops[key] ?? [])
        }
        return TimeSequence(connections: connections.sorted { $0.bytes > $1.bytes }, otherPackets: other)
    }

    /// Unwraps 32-bit sequence numbers into a 64-bit space relative to a base.
    struct Unwrapper {
        var base: UInt32
        var last: Int64 = 0

        mutating func relative(_ value: UInt32) -> Int64 {
            let step = Int64(Int32(bitPattern: value &- (self.base &+ UInt32(truncatingIfNeeded: self.last))))
            self.last += step
            return self.last
        }
    }

    static func connection(
        _ packets: [(at: Int64, segment: CapturedSegment)], dropped: [(at: Int64, segment: CapturedSegment)]
    )
        -> Connection?
    {
        guard let first = packets.first else { return nil }
        // The sender is the side that carried more payload (a download's server).
        var payload: [CapturedSegment.Endpoint: Int] = [:]
        for packet in packets { payload[packet.segment.source, default: 0] += packet.segment.payloadLength }
        let a = first.segment.source, b = first.segment.destination
        let sender = (payload[b] ?? 0) > (payload[a] ?? 0) ? b : a
        let receiver = sender == a ? b : a
        let start = min(first.at, dropped.first?.at ?? first.at)
        // In doubles: a capture's stamps may be anything, and their difference overflow.
        func seconds(_ at: Int64) -> Double { (Double(at) - Double(start)) / 1e9 }
        let senderSYN = packets.first { $0.segment.source == sender && $0.segment.flags.contains(.syn) }
        let firstData = packets.first { $0.segment.source == sender }
        guard let base = senderSYN.map({ $0.segment.sequence &+ 1 }) ?? firstData?.segment.sequence else {
            return nil  // nothing from the sender at all
        }
        let receiverSYN = packets.first { $0.segment.source == receiver && $0.segment.flags.contains(.syn) }
        // Windows are scaled only when both SYNs offered the option (RFC 7323), by the receiver's.
        let scale = senderSYN?.segment.windowScale != nil ? receiverSYN?.segment.windowScale : nil
        var connection = Connection(
            sender: sender, receiver: receiver, startedAt: start,
            duration: seconds(max(packets.last?.at ?? start, dropped.last?.at ?? start)))
        connection.windowScaleKnown = receiverSYN != nil && senderSYN != nil
        var sequence = Unwrapper(base: base)
        var acknowledged = Unwrapper(base: base)
        var highest: Int64 = 0
        for packet in packets {
            let segment = packet.segment
            let at = seconds(packet.at)
            let fromSender = segment.source == sender
            for (flag, name) in [(CapturedSegment.Flags.syn, "SYN"), (.fin, "FIN"), (.rst, "RST")]
            where segment.flags.contains(flag) {
                connection.flags.append(Flag(at: at, kind: name, fromSender: fromSender))
            }
            if fromSender {
                guard segment.payloadLength > 0 else { continue }
                guard connection.segments.count < Self.maxPoints else {
                    connection.leftOut += 1
                    continue
                }
                let from = sequence.relative(segment.sequence)
                let to = from + Int64(segment.payloadLength)
                connection.segments.append(Segment(at: at, start: from, end: to, retransmission: from < highest))
                highest = max(highest, to)
            } else if segment.flags.contains(.ack), !segment.flags.contains(.syn) || receiverSYN != nil {
                guard connection.acknowledgements.count < Self.maxPoints else {
                    connection.leftOut += 1
                    continue
                }
                let ack = acknowledged.relative(segment.acknowledgement)
                let window = segment.window.map { Int64($0) << Int64(segment.flags.contains(.syn) ? 0 : scale ?? 0) }
                // Nothing before the first byte: a SYN-ACK acknowledges the SYN, which takes 1.
                connection.acknowledgements.append(
                    Acknowledgement(at: at, ack: max(0, ack), window: window.map { max(0, ack) + $0 }))
            }
        }
        var droppedSequence = Unwrapper(base: base)
        for packet in dropped where packet.segment.source == sender && packet.segment.payloadLength > 0 {
            guard connection.dropped.count < Self.maxPoints else { break }
            let from = droppedSequence.relative(packet.segment.sequence)
            connection.dropped.append(
                Segment(
                    at: seconds(packet.at), start: from, end: from + Int64(packet.segment.payloadLength),
                    retransmission: false))
        }
        return connection
    }
}
