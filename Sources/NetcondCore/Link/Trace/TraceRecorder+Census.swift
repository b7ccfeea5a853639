extension TraceRecorder {
    /// The first pass over a capture: every TCP connection in it with a few counters (no packets
    /// kept), enough to list them, pick the one to record and know its window.
    struct Census {
        var flows: [FlowSummary] = []
        var index: [FlowKey: Int] = [:]
        var firstTimestamp: Int64?
        var lastTime: Int64 = 0
        /// Packets read, and TCP segments among them.
        var records = 0
        var tcpPackets = 0
        /// The window asked for, to count each flow's data within it.
        let low: Int64
        let high: Int64

        init(options: Options) {
            self.low = options.from?.nanoseconds ?? 0
            self.high = options.to?.nanoseconds ?? Int64.max
        }

        mutating func add(_ record: PacketCaptureFile.Record, source: String) throws(PacketCaptureFile.ReadError) {
            guard let packet = try self.read(record, source: source) else { return }
            let slot: Int
            if let known = self.index[packet.key] {
                slot = known
            } else {
                slot = self.flows.count
                self.index[packet.key] = slot
                self.flows.append(FlowSummary(key: packet.key, firstTime: packet.packet.time))
            }
            self.flows[slot].add(packet.packet, low: self.low, high: self.high)
        }

        /// A record's TCP packet and its flow (nil when it holds none), after the capture's clock
        /// and counts are updated.
        mutating func read(_ record: PacketCaptureFile.Record, source: String) throws(PacketCaptureFile.ReadError)
            -> (key: FlowKey, packet: FlowPacket)?
        {
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
            let time = TraceRecorder.time(record.timestamp, since: first)
            self.lastTime = max(self.lastTime, time)
            guard
                let segment = CapturedSegment.decode(
                    linkType: record.linkType, bytes: record.bytes, originalLength: record.originalLength)
            else { return nil }
            self.tcpPackets += 1
            let fromA = segment.source < segment.destination || segment.source == segment.destination
            let key =
                fromA
                ? FlowKey(a: segment.source, b: segment.destination)
                : FlowKey(a: segment.destination, b: segment.source)
            return (
                key,
                FlowPacket(
                    time: time, sequence: segment.sequence, acknowledgement: segment.acknowledgement,
                    payload: Int32(clamping: segment.payloadLength), ipLength: Int32(clamping: segment.ipLength),
                    flags: segment.flags, fromA: fromA)
            )
        }
    }

    /// What the first pass keeps of one side of a connection (the packets its lower or higher endpoint sent).
    struct SideSummary {
        var packets = 0
        var payload: Int64 = 0
        /// The sequence number of its first SYN or SYN-ACK, where its data starts.
        var synSequence: UInt32?
        /// Its data packets within the window: their payload, the first's and the last's moments (capture order).
        var windowPayload: Int64 = 0
        var windowFirst: Int64?
        var windowLast: Int64?
    }

    /// One connection as the first pass counts it.
    struct FlowSummary {
        var key: FlowKey
        var firstTime: Int64
        var lastTime: Int64
        /// Who sent the first SYN (without ACK), and the first SYN-ACK (true: endpoint `a`).
        var synFromA: Bool?
        var synAckFromA: Bool?
        var fromA = SideSummary()
        var fromB = SideSummary()

        init(key: FlowKey, firstTime: Int64) {
            self.key = key
            self.firstTime = firstTime
            self.lastTime = firstTime
        }

        mutating func add(_ packet: FlowPacket, low: Int64, high: Int64) {
            self.firstTime = min(self.firstTime, packet.time)
            self.lastTime = max(self.lastTime, packet.time)
            if packet.flags.contains(.syn) {
                if packet.flags.contains(.ack) {
                    if self.synAckFromA == nil { self.synAckFromA = packet.fromA }
                } else if self.synFromA == nil {
                    self.synFromA = packet.fromA
                }
            }
            if packet.fromA {
                Self.count(packet, into: &self.fromA, low, high)
            } else {
                Self.count(packet, into: &self.fromB, low, high)
            }
        }

        private static func count(_ packet: FlowPacket, into side: inout SideSummary, _ low: Int64, _ high: Int64) {
            side.packets += 1
            side.payload = side.payload.addingSaturating(Int64(packet.payload))
            if packet.flags.contains(.syn) && side.synSequence == nil { side.synSequence = packet.sequence }
            if packet.payload > 0 && packet.time >= low && packet.time <= high {
                side.windowPayload = side.windowPayload.addingSaturating(Int64(packet.payload))
                if side.windowFirst == nil { side.windowFirst = packet.time }
                side.windowLast = packet.time
            }
        }

        /// The client: who sent the first SYN, else who answered the first SYN-ACK, else the side that sent less.
        var sides: Sides {
            if let syn = self.synFromA { return Sides(clientIsA: syn, bySYN: true) }
            if let synAck = self.synAckFromA { return Sides(clientIsA: !synAck, bySYN: true) }
            return Sides(clientIsA: self.fromA.payload <= self.fromB.payload, bySYN: false)
        }

        /// The side that sends `direction`'s data (the server for down).
        func sender(_ direction: Direction) -> SideSummary {
            let senderIsA = self.sides.clientIsA == (direction == .up)
            return senderIsA ? self.fromA : self.fromB
        }

        var client: CapturedSegment.Endpoint { self.sides.clientIsA ? self.key.a : self.key.b }
        var server: CapturedSegment.Endpoint { self.sides.clientIsA ? self.key.b : self.key.a }
    }

    /// Nanoseconds from the capture's first packet, held within ±2^59 (18 years) so no later
    /// difference or multiple of moments can overflow, whatever a capture's timestamps say.
    static func time(_ timestamp: Int64, since first: Int64) -> Int64 {
        let limit: Int64 = 1 << 59
        let (difference, overflow) = timestamp.subtractingReportingOverflow(first)
        if overflow { return timestamp > first ? limit : -limit }
        return min(max(difference, -limit), limit)
    }
}

extension Int64 {
    /// `self + other`, held at the bounds instead of trapping.
    func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = self.addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
