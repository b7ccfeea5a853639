extension TraceRecorder {
    /// One flow, one direction, one window, fed the flow's packets in capture order and keeping
    /// only running state: the opportunities (held as ``OpportunityTimes``), the delays, the loss
    /// and the idle stretches.
    struct Analysis {
        let sides: Sides
        let direction: Direction
        let client: CapturedSegment.Endpoint
        let server: CapturedSegment.Endpoint
        let options: Options
        let source: String
        let duration: Span
        /// The window asked for, and the window recorded (from the first data packet without
        /// --from, to the last without --to), in nanoseconds since the capture's first packet.
        let low: Int64
        let high: Int64
        let start: Int64
        let end: Int64

        // Data packets of the chosen direction within the window.
        var packets = 0
        var ipBytes: Int64 = 0
        var payloadBytes: Int64 = 0
        var payloadCounts: [Int32: Int] = [:]
        // Opportunities.
        var opportunities = OpportunityTimes()
        var crossed: Int64 = 0
        var latest: Int64 = 0
        var run = 0
        var burst: Int64?
        /// Opportunities past those kept (the trace is refused then), and the last one's time.
        var extra = 0
        var lastOpportunity: Int64 = 0
        // Per second.
        /// The window's whole seconds, and the IP bytes of each that had any (a window of idle
        /// months holds a few entries, not a counter a second).
        var wholeSeconds: Int
        var bins: [Int: Int64] = [:]
        // Idle: gaps over 50 ms (a median above it sets the threshold), all gaps counted.
        var idle = IdleState()
        var handshake = HandshakeState()
        var loss: LossState
        var dataToAck = DataToAckState()

        init(flow: FlowSummary, options: Options, source: String, duration: Span) {
            self.sides = flow.sides
            self.direction = options.direction
            self.client = flow.client
            self.server = flow.server
            self.options = options
            self.source = source
            self.duration = duration
            self.low = options.from?.nanoseconds ?? 0
            self.high = options.to?.nanoseconds ?? Int64.max
            let sender = flow.sender(options.direction)
            (self.start, self.end) = Self.window(flow, options)
            self.wholeSeconds = max(0, Int((self.end - self.start) / 1_000_000_000))
            // The sender's SYN says where its data starts.
            self.loss = LossState(next: sender.synSequence.map { $0 &+ 1 })
        }

        /// The window recorded, in nanoseconds since the capture's first packet. Without --from the
        /// trace starts at the first data packet (not at the handshake or the request before it,
        /// which would replay as no capacity every period).
        static func window(_ flow: FlowSummary, _ options: Options) -> (start: Int64, end: Int64) {
            let sender = flow.sender(options.direction)
            let start = options.from?.nanoseconds ?? sender.windowFirst ?? 0
            return (start, options.to?.nanoseconds ?? sender.windowLast ?? start)
        }

        /// The longest window recorded: a trace's times stop at a year (``LinkTrace/parse``), and
        /// the per-second rates keep a counter a second.
        static let longestWindow = Int64(365 * 86_400) * 1_000_000_000

        func isSender(_ packet: FlowPacket) -> Bool { TraceRecorder.isSender(packet, self.sides, self.direction) }
        func isData(_ packet: FlowPacket) -> Bool { packet.payload > 0 && self.isSender(packet) }

        mutating func add(_ packet: FlowPacket) {
            self.handshake.add(packet, clientSent: self.sides.isClient(packet))
            let data = self.isData(packet)
            self.dataToAck.add(packet, data: data, sender: self.isSender(packet))
            guard data else { return }
            self.loss.add(packet, inWindow: packet.time >= self.start && packet.time <= self.end)
            guard packet.time >= self.low && packet.time <= self.high else { return }
            self.packets += 1
            let wire = Self.wireBytes(packet)
            self.ipBytes = self.ipBytes.addingSaturating(wire)
            self.payloadBytes = self.payloadBytes.addingSaturating(Int64(packet.payload))
            self.payloadCounts[packet.payload, default: 0] += 1
            // One opportunity at the packet's millisecond for every 1,500-byte boundary its bytes
            // cross; arrivals stamped a little out of order (several capturing CPUs) keep the file sorted.
            self.latest = max(self.latest, (packet.time - self.start) / 1_000_000)
            let size = Int64(LinkTrace.opportunityBytes)
            let before = self.crossed / size
            self.crossed = self.crossed.addingSaturating(wire)
            for _ in before..<(self.crossed / size) { self.opportunity(self.latest) }
            let bin = Int((packet.time - self.start) / 1_000_000_000)
            if bin >= 0 && bin < self.wholeSeconds { self.bins[bin] = (self.bins[bin] ?? 0).addingSaturating(wire) }
            self.idle.add(packet.time)
        }

        /// Counts an opportunity, keeping it while the trace can still be read back (up to
        /// ``LinkTrace/maximumLines``, at most 8,333 in a millisecond).
        mutating func opportunity(_ time: Int64) {
            self.run = self.opportunities.count > 0 && self.lastOpportunity == time ? self.run + 1 : 1
            if self.run > 8_333 && self.burst == nil { self.burst = time }
            self.lastOpportunity = time
            if self.opportunities.count < LinkTrace.maximumLines + 1 {
                self.opportunities.append(time)
            } else {
                self.extra += 1
            }
        }

        /// What a packet weighed on the link: its IP length, else its payload and 40 bytes of headers.
        static func wireBytes(_ packet: FlowPacket) -> Int64 {
            packet.ipLength > 0 ? Int64(packet.ipLength) : Int64(packet.payload) + 40
        }

        func recording(records: Int, tcpPackets: Int, connections: Int) throws(TraceRecordError) -> TraceRecording {
            let count = self.opportunities.count + self.extra
            let last = self.lastOpportunity
            guard count > 0, last > 0 else {
                throw .unusable(
                    "\(self.source): the chosen direction's data (\(self.packets) packet\(self.packets == 1 ? "" : "s")) "
                        + (count == 0 ? "is less than one 1500-byte opportunity" : "all arrived within one millisecond")
                        + "; a trace needs a period: record a longer download")
            }
            // Refuses a trace ``LinkTrace/parse`` would refuse: too many lines, too many in one
            // millisecond (a capture whose timestamps are coarser than its rate), or over a year.
            guard count <= LinkTrace.maximumLines else {
                throw .unusable(
                    "\(self.source): the trace would have \(count) opportunities; allowed: up to "
                        + "\(LinkTrace.maximumLines): record a shorter window with --from and --to")
            }
            if let burst = self.burst {
                throw .unusable(
                    "\(self.source): more than 8333 opportunities (over 100 Gbit/s) at \(burst) ms from the window's start; "
                        + "are the capture's timestamps coarser than a millisecond?")
            }
            guard last <= 365 * 86_400_000 else {
                throw .unusable(
                    "\(self.source): the trace would last \(last / 1_000) s; allowed: up to a year: record a shorter "
                        + "window with --from and --to")
            }
            let length = Span(nanoseconds: max(self.end - self.start, 1))
            let mean = Double(self.ipBytes) * 8 / length.seconds
            let typical = self.typicalPayload()
            return TraceRecording(
                client: self.client, server: self.server, clientBySYN: self.sides.bySYN, direction: self.direction,
                windowStart: Span(nanoseconds: self.start), windowEnd: Span(nanoseconds: self.end),
                captureDuration: self.duration, packets: self.packets, ipBytes: self.ipBytes,
                payloadBytes: self.payloadBytes, trace: self.opportunities,
                meanRate: Bandwidth(bitsPerSecond: mean < 9.2e18 ? Int64(mean) : .max),
                perSecondRates: TraceRecording.PerSecondRates(
                    wholeSeconds: self.wholeSeconds,
                    busy: self.bins.values.map {
                        Bandwidth(bitsPerSecond: $0.multipliedReportingOverflow(by: 8).overflow ? .max : $0 * 8)
                    }),
                delay: self.delay(), loss: self.loss.result(typical: typical),
                idle: self.idle.result(start: self.start), records: records, tcpPackets: tcpPackets,
                connections: connections)
        }

        /// The most common payload of the direction's data packets (the larger on a tie).
        func typicalPayload() -> Int {
            let best = self.payloadCounts.max { ($0.value, $0.key) < ($1.value, $1.key) }
            return max(1, Int(best?.key ?? 1))
        }

        func delay() -> TraceRecording.Delay {
            guard let handshake = self.handshake.result else {
                return .unknown(smallestDataToAck: self.dataToAck.smallest.map { Self.rounded(Span(nanoseconds: $0)) })
            }
            let first = handshake.synAck - handshake.syn
            let second = handshake.ack - handshake.synAck
            let millisecond = Span.milliseconds(1)
            if first > millisecond && second > millisecond
                && min(first, second).nanoseconds * 10 >= max(first, second).nanoseconds
            {
                return .midLink(handshake, down: Self.rounded(first), up: Self.rounded(second))
            }
            return .halfRoundTrip(handshake, oneWay: Self.rounded(handshake.roundTrip.scaled(by: 0.5)))
        }

        /// To the microsecond (a profile writes `12.345ms`).
        static func rounded(_ span: Span) -> Span {
            Span(nanoseconds: (span.nanoseconds + 500) / 1_000 * 1_000)
        }
    }

    /// Sent by the side that sends the chosen direction's data (the server for down).
    static func isSender(_ packet: FlowPacket, _ sides: Sides, _ direction: Direction) -> Bool {
        sides.isClient(packet) == (direction == .up)
    }
}
