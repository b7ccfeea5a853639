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
/// It reads the capture twice, never keeping its packets: the first pass counts each connection
/// (``Census``) and picks the one to record, the second feeds that connection's packets to an
/// analysis that keeps running state (``Analysis``). Memory is a few hundred bytes per connection
/// and about 2 bytes per millisecond of trace, whatever the number of packets.
public struct TraceRecorder {
    /// One TCP packet as the passes see it (never stored).
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

    /// What to record: which direction, which part of the capture (seconds from its first
    /// packet), and which connection (by default the one with the most data in the direction).
    public struct Options: Sendable, Equatable {
        public var direction: Direction
        public var from: Span?
        public var to: Span?
        public var flow: FlowChoice?

        public init(direction: Direction = .down, from: Span? = nil, to: Span? = nil, flow: FlowChoice? = nil) {
            self.direction = direction
            self.from = from
            self.to = to
            self.flow = flow
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

    /// Opens the capture afresh (it is read twice).
    public typealias Opener = () throws(PacketCaptureFile.ReadError) -> PacketCaptureFile

    /// Reads the capture `open` gives and records the chosen connection.
    public static func record(options: Options, open: Opener) throws(TraceRecordError) -> TraceRecording {
        let census = try self.census(options: options, open: open)
        let source = census.source
        let duration = Span(nanoseconds: census.census.lastTime)
        try self.checkWindow(options, duration: duration)
        guard census.census.tcpPackets > 0 else {
            throw .unusable("\(source): no TCP packets in the capture (\(census.census.records) packets read)")
        }
        let chosen = try self.choose(census.census, options: options, source: source)
        let flow = census.census.flows[chosen]
        // Before the analysis counts the window's seconds: timestamps that span years are refused.
        let window = Analysis.window(flow, options)
        guard window.end - window.start <= Analysis.longestWindow else {
            throw .unusable(
                "\(source): the window lasts \((window.end - window.start) / 86_400_000_000_000) days; allowed: up to 365 days "
                    + "(are the capture's timestamps right?): record a shorter window with --from and --to")
        }
        var analysis = Analysis(flow: flow, options: options, source: source, duration: duration)
        do {
            var capture = try open()
            var reader = Census(options: options)
            while let record = try capture.next() {
                guard let (key, packet) = try reader.read(record, source: source), key == flow.key else { continue }
                analysis.add(packet)
            }
        } catch {
            throw .capture(error)
        }
        let counts = census.census
        return try analysis.recording(
            records: counts.records, tcpPackets: counts.tcpPackets, connections: counts.flows.count)
    }

    /// The connections in the capture, as `--list-flows` shows them.
    public static func flows(open: Opener) throws(TraceRecordError) -> [FlowListing] {
        let census = try self.census(options: Options(), open: open)
        return census.census.flows.enumerated().map { FlowListing($1, number: $0 + 1) }
    }

    /// The first pass.
    static func census(options: Options, open: Opener) throws(TraceRecordError) -> (census: Census, source: String) {
        var census = Census(options: options)
        do {
            var capture = try open()
            while let record = try capture.next() {
                try census.add(record, source: capture.source)
            }
            return (census, capture.source)
        } catch {
            throw .capture(error)
        }
    }

    static func checkWindow(_ options: Options, duration: Span) throws(TraceRecordError) {
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
    }

    /// The flow to record: the one `--flow` names, else the one that carried the most payload in
    /// the chosen direction within the window (the first of equals).
    static func choose(_ census: Census, options: Options, source: String) throws(TraceRecordError) -> Int {
        let direction = options.direction
        let windowed = options.from != nil || options.to != nil
        if let choice = options.flow {
            guard let number = choice.match(census.flows.map(\.key)) else {
                let listed = census.flows.enumerated().map { FlowListing($1, number: $0 + 1) }
                throw .flow(
                    "\(source): --flow \(choice) names no connection in the capture; allowed: a number from 1 to "
                        + "\(census.flows.count), or two endpoints (either order) of one of:\n"
                        + FlowListing.table(listed, limit: 20))
            }
            let flow = census.flows[number]
            guard flow.sender(direction).windowPayload > 0 else {
                throw .unusable(
                    "\(source): connection \(number + 1) (\(flow.client) -> \(flow.server)) carried no data \(direction), "
                        + "toward the \(direction == .down ? "client" : "server")"
                        + (windowed ? " within the window" : "")
                        + "; try --direction \(direction == .down ? "up" : "down"), or another --flow (--list-flows)")
            }
            return number
        }
        var best: (flow: Int, bytes: Int64)?
        for (number, flow) in census.flows.enumerated() {
            let bytes = flow.sender(direction).windowPayload
            if bytes > (best?.bytes ?? 0) { best = (number, bytes) }
        }
        guard let best else {
            let other = direction == .down ? "up" : "down"
            throw .unusable(
                "\(source): no data packets in the chosen direction (\(direction), toward the "
                    + "\(direction == .down ? "client" : "server")) in \(census.tcpPackets) TCP packets of "
                    + "\(census.flows.count) connection\(census.flows.count == 1 ? "" : "s")"
                    + (windowed ? " within the window" : "")
                    + "; try --direction \(other)")
        }
        return best.flow
    }

    static func seconds(_ span: Span) -> String { formatTrimmed(span.seconds) }
}

/// Why a capture cannot be recorded: the file (exit 1), the window or flow asked for (a usage
/// error), or nothing a trace can be made of in it (exit 1).
public enum TraceRecordError: Error, Sendable, Equatable, CustomStringConvertible {
    case capture(PacketCaptureFile.ReadError)
    case window(String)
    case flow(String)
    case unusable(String)

    public var description: String {
        switch self {
        case .capture(let error): return error.description
        case .window(let message), .flow(let message), .unusable(let message): return message
        }
    }
}

/// 32-bit sequence numbers compared as TCP compares them (RFC 1982): across the wrap, 5 is after 4294967290.
enum SequenceNumber {
    static func after(_ a: UInt32, _ b: UInt32) -> Bool { Int32(bitPattern: a &- b) > 0 }
}
