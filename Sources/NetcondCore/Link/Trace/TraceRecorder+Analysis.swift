extension TraceRecorder {
    /// One flow, one direction, one window: the opportunities, the delays, the loss and the idle stretches.
    struct Analysis {
        let flow: Flow
        let sides: Sides
        let options: Options
        let source: String
        let duration: Span
        /// Data packets of the chosen direction within the window, in capture order.
        let data: [FlowPacket]
        /// The window, in nanoseconds since the capture's first packet.
        let start: Int64
        let end: Int64

        init(flow: Flow, sides: Sides, options: Options, source: String, duration: Span) throws(TraceRecordError) {
            self.flow = flow
            self.sides = sides
            self.options = options
            self.source = source
            self.duration = duration
            let low = options.from?.nanoseconds ?? 0
            let high = options.to?.nanoseconds ?? Int64.max
            let data = flow.packets.filter {
                TraceRecorder.isData($0, sides, options.direction) && $0.time >= low && $0.time <= high
            }
            self.data = data
            // Without --from the trace starts at the first data packet (not at the handshake or
            // the request before it, which would replay as no capacity every period).
            self.start = options.from?.nanoseconds ?? data.first?.time ?? 0
            self.end = options.to?.nanoseconds ?? data.last?.time ?? self.start
        }

        func recording(records: Int, tcpPackets: Int, connections: Int) throws(TraceRecordError) -> TraceRecording {
            let opportunities = self.opportunities()
            guard let last = opportunities.last, last > 0 else {
                throw .unusable(
                    "\(self.source): the chosen direction's data (\(self.data.count) packet\(self.data.count == 1 ? "" : "s")) "
                        + (opportunities.isEmpty
                            ? "is less than one 1500-byte opportunity" : "all arrived within one millisecond")
                        + "; a trace needs a period: record a longer download")
            }
            try self.checkReadsBack(opportunities)
            let client = self.sides.clientIsA ? self.flow.key.a : self.flow.key.b
            let server = self.sides.clientIsA ? self.flow.key.b : self.flow.key.a
            let ipBytes = self.data.reduce(Int64(0)) { $0 + Self.wireBytes($1) }
            let payloadBytes = self.data.reduce(Int64(0)) { $0 + Int64($1.payload) }
            let length = Span(nanoseconds: max(self.end - self.start, 1))
            return TraceRecording(
                client: client, server: server, clientBySYN: self.sides.bySYN, direction: self.options.direction,
                windowStart: Span(nanoseconds: self.start), windowEnd: Span(nanoseconds: self.end),
                captureDuration: self.duration, packets: self.data.count, ipBytes: ipBytes, payloadBytes: payloadBytes,
                trace: LinkTrace(milliseconds: opportunities, source: "recorded"),
                meanRate: Bandwidth(bitsPerSecond: Int64(Double(ipBytes * 8) / length.seconds)),
                perSecondRates: self.perSecondRates(), delay: self.delay(), loss: self.loss(), idle: self.idle(),
                records: records, tcpPackets: tcpPackets, connections: connections)
        }

        /// Refuses a trace ``LinkTrace/parse`` would refuse: too many lines, or too many in one
        /// millisecond (a capture whose timestamps are coarser than its rate).
        func checkReadsBack(_ opportunities: [Int64]) throws(TraceRecordError) {
            guard opportunities.count <= LinkTrace.maximumLines else {
                throw .unusable(
                    "\(self.source): the trace would have \(opportunities.count) opportunities; allowed: up to "
                        + "\(LinkTrace.maximumLines): record a shorter window with --from and --to")
            }
            // A trace's times stop at a year (``LinkTrace/parse``); the per-second rates count one bin a second.
            let longest = Int64(365 * 86_400) * 1_000_000_000
            guard self.end - self.start <= longest else {
                throw .unusable(
                    "\(self.source): the window lasts \((self.end - self.start) / 86_400_000_000_000) days; allowed: up to 365 days "
                        + "(are the capture's timestamps right?): record a shorter window with --from and --to")
            }
            var run = 0
            for (index, time) in opportunities.enumerated() {
                run = index > 0 && opportunities[index - 1] == time ? run + 1 : 1
                guard run <= 8_333 else {
                    throw .unusable(
                        "\(self.source): more than 8333 opportunities (over 100 Gbit/s) at \(time) ms from the window's start; "
                            + "are the capture's timestamps coarser than a millisecond?")
                }
            }
        }

        /// What a packet weighed on the link: its IP length, else its payload and 40 bytes of headers.
        static func wireBytes(_ packet: FlowPacket) -> Int64 {
            packet.ipLength > 0 ? Int64(packet.ipLength) : Int64(packet.payload) + 40
        }

        // MARK: Opportunities

        /// One opportunity at each data packet's millisecond for every 1,500-byte boundary its bytes cross.
        func opportunities() -> [Int64] {
            var times: [Int64] = []
            var bytes: Int64 = 0
            var latest: Int64 = 0
            let size = Int64(LinkTrace.opportunityBytes)
            for packet in self.data {
                // Arrivals stamped a little out of order (several capturing CPUs) keep the file sorted.
                latest = max(latest, (packet.time - self.start) / 1_000_000)
                let before = bytes / size
                bytes += Self.wireBytes(packet)
                for _ in before..<(bytes / size) { times.append(latest) }
            }
            return times
        }

        /// Bits per second in each whole second of the window (the partial last one left out).
        func perSecondRates() -> [Bandwidth] {
            let seconds = Int((self.end - self.start) / 1_000_000_000)
            guard seconds > 0 else { return [] }
            var bins = [Int64](repeating: 0, count: seconds)
            for packet in self.data {
                let bin = Int((packet.time - self.start) / 1_000_000_000)
                if bin >= 0 && bin < seconds { bins[bin] += Self.wireBytes(packet) }
            }
            return bins.map { Bandwidth(bitsPerSecond: $0 * 8) }
        }

        // MARK: Delay

        /// The handshake's moments, when the capture holds one: the client's SYN (the last before
        /// the answer), the server's SYN-ACK, and the client's ACK of it.
        func handshake() -> TraceRecording.Handshake? {
            let packets = self.flow.packets
            guard
                let answer = packets.firstIndex(where: { $0.flags.contains([.syn, .ack]) && !self.sides.isClient($0) }),
                let syn = packets[..<answer].lastIndex(where: {
                    $0.flags.contains(.syn) && !$0.flags.contains(.ack) && self.sides.isClient($0)
                })
            else { return nil }
            let expected = packets[answer].sequence &+ 1
            guard
                let ack = packets[(answer + 1)...].first(where: {
                    self.sides.isClient($0) && $0.flags.contains(.ack) && !$0.flags.contains(.syn)
                        && $0.acknowledgement == expected
                })
            else { return nil }
            return TraceRecording.Handshake(
                syn: Span(nanoseconds: packets[syn].time), synAck: Span(nanoseconds: packets[answer].time),
                ack: Span(nanoseconds: ack.time))
        }

        func delay() -> TraceRecording.Delay {
            guard let handshake = self.handshake() else {
                return .unknown(smallestDataToAck: self.smallestDataToAck())
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

        /// Without a handshake: the shortest time from a data packet to the first acknowledgement of it.
        func smallestDataToAck() -> Span? {
            var pending: [(end: UInt32, time: Int64)] = []
            var head = 0
            var smallest: Int64?
            for packet in self.flow.packets {
                if TraceRecorder.isData(packet, self.sides, self.options.direction) {
                    pending.append((packet.sequence &+ UInt32(packet.payload), packet.time))
                } else if packet.flags.contains(.ack)
                    && !TraceRecorder.isSender(packet, self.sides, self.options.direction)
                {
                    while head < pending.count && !SequenceNumber.after(pending[head].end, packet.acknowledgement) {
                        let spacing = packet.time - pending[head].time
                        smallest = min(smallest ?? spacing, spacing)
                        head += 1
                    }
                }
            }
            return smallest.map { Self.rounded(Span(nanoseconds: $0)) }
        }

        // MARK: Loss

        /// Holes in the sequence (packets the capture never saw) and retransmissions, in the window.
        func loss() -> TraceRecording.Loss {
            let typical = self.typicalPayload()
            var next: UInt32?
            // The sender's SYN says where its data starts.
            if let syn = self.flow.packets.first(where: {
                $0.flags.contains(.syn) && TraceRecorder.isSender($0, self.sides, self.options.direction)
            }) {
                next = syn.sequence &+ 1
            }
            var loss = TraceRecording.Loss(
                holes: 0, missingPackets: 0, retransmissions: 0, deliveredPackets: 0, typicalPayload: typical)
            for packet in self.flow.packets where TraceRecorder.isData(packet, self.sides, self.options.direction) {
                let inWindow = packet.time >= self.start && packet.time <= self.end
                let end = packet.sequence &+ UInt32(packet.payload)
                if inWindow { loss.deliveredPackets += max(1, (Int(packet.payload) + typical - 1) / typical) }
                guard let expected = next else {
                    next = end
                    continue
                }
                if SequenceNumber.after(packet.sequence, expected) {
                    if inWindow {
                        let hole = Int(packet.sequence &- expected)
                        loss.holes += 1
                        loss.missingPackets += max(1, (hole + typical / 2) / typical)
                    }
                    next = end
                } else if !SequenceNumber.after(end, expected) {
                    if inWindow { loss.retransmissions += 1 }
                } else {
                    next = end
                }
            }
            return loss
        }

        /// The most common payload of the direction's data packets (the larger on a tie).
        func typicalPayload() -> Int {
            var counts: [Int32: Int] = [:]
            for packet in self.data { counts[packet.payload, default: 0] += 1 }
            let best = counts.max { ($0.value, $0.key) < ($1.value, $1.key) }
            return max(1, Int(best?.key ?? 1))
        }

        // MARK: Idle

        /// Gaps between arrivals longer than max(200 ms, 4 × the median gap), from the window's start.
        func idle() -> TraceRecording.Idle {
            var gaps: [Int64] = []
            var previous = self.data.first?.time ?? self.start
            for packet in self.data.dropFirst() {
                gaps.append(max(0, packet.time - previous))
                previous = max(previous, packet.time)
            }
            let median = gaps.isEmpty ? 0 : gaps.sorted()[gaps.count / 2]
            let threshold = max(200_000_000, 4 * median)
            var stretches: [TraceRecording.IdleStretch] = []
            // Before the first arrival (a --from ahead of the data) replays as no capacity too.
            if let first = self.data.first?.time, first - self.start > threshold {
                stretches.append(
                    TraceRecording.IdleStretch(
                        start: Span(nanoseconds: self.start), length: Span(nanoseconds: first - self.start)))
            }
            previous = self.data.first?.time ?? self.start
            for packet in self.data.dropFirst() {
                if packet.time - previous > threshold {
                    stretches.append(
                        TraceRecording.IdleStretch(
                            start: Span(nanoseconds: previous), length: Span(nanoseconds: packet.time - previous)))
                }
                previous = max(previous, packet.time)
            }
            return TraceRecording.Idle(threshold: Span(nanoseconds: threshold), stretches: stretches)
        }
    }

    /// Sent by the side that sends the chosen direction's data (the server for down).
    static func isSender(_ packet: FlowPacket, _ sides: Sides, _ direction: Direction) -> Bool {
        sides.isClient(packet) == (direction == .up)
    }
}
