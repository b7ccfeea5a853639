extension TraceRecorder {
    /// The handshake's moments, found as the flow's packets go by: the client's SYN (the last
    /// before the answer), the server's first SYN-ACK, and the client's ACK of it.
    struct HandshakeState {
        var syn: Int64?
        var answer: (time: Int64, sequence: UInt32)?
        var failed = false
        var result: TraceRecording.Handshake?

        mutating func add(_ packet: FlowPacket, clientSent: Bool) {
            guard self.result == nil && !self.failed else { return }
            if let answer = self.answer {
                if clientSent && packet.flags.contains(.ack) && !packet.flags.contains(.syn)
                    && packet.acknowledgement == answer.sequence &+ 1, let syn = self.syn
                {
                    self.result = TraceRecording.Handshake(
                        syn: Span(nanoseconds: syn), synAck: Span(nanoseconds: answer.time),
                        ack: Span(nanoseconds: packet.time))
                }
            } else if packet.flags.contains([.syn, .ack]) && !clientSent {
                self.answer = (packet.time, packet.sequence)
                // No SYN before the answer: the capture began inside the handshake.
                if self.syn == nil { self.failed = true }
            } else if packet.flags.contains(.syn) && !packet.flags.contains(.ack) && clientSent {
                self.syn = packet.time
            }
        }
    }

    /// Without a handshake: the shortest time from a data packet to the first acknowledgement of
    /// it. The data not yet acknowledged waits in a queue of at most ``limit`` packets (the oldest
    /// are forgotten past it: a capture without the receiver's ACKs never empties it).
    struct DataToAckState {
        static let limit = 1 << 18
        var pending: [(end: UInt32, time: Int64)] = []
        var head = 0
        var smallest: Int64?

        mutating func add(_ packet: FlowPacket, data: Bool, sender: Bool) {
            if data {
                if self.pending.count - self.head >= Self.limit { self.head += 1 }
                if self.head > 4_096 && self.head * 2 > self.pending.count {
                    self.pending.removeFirst(self.head)
                    self.head = 0
                }
                self.pending.append((packet.sequence &+ UInt32(packet.payload), packet.time))
            } else if packet.flags.contains(.ack) && !sender {
                while self.head < self.pending.count
                    && !SequenceNumber.after(self.pending[self.head].end, packet.acknowledgement)
                {
                    let spacing = packet.time - self.pending[self.head].time
                    self.smallest = min(self.smallest ?? spacing, spacing)
                    self.head += 1
                }
            }
        }
    }

    /// Holes in the chosen direction's sequence (packets the capture never saw) and
    /// retransmissions, in the window; the sizes are kept by count until the typical segment is known.
    struct LossState {
        var next: UInt32?
        var holes: [Int: Int] = [:]
        var delivered: [Int32: Int] = [:]
        var retransmissions = 0

        init(next: UInt32?) { self.next = next }

        mutating func add(_ packet: FlowPacket, inWindow: Bool) {
            let end = packet.sequence &+ UInt32(packet.payload)
            if inWindow { self.delivered[packet.payload, default: 0] += 1 }
            guard let expected = self.next else {
                self.next = end
                return
            }
            if SequenceNumber.after(packet.sequence, expected) {
                if inWindow { self.holes[Int(packet.sequence &- expected), default: 0] += 1 }
                self.next = end
            } else if !SequenceNumber.after(end, expected) {
                if inWindow { self.retransmissions += 1 }
            } else {
                self.next = end
            }
        }

        func result(typical: Int) -> TraceRecording.Loss {
            var loss = TraceRecording.Loss(
                holes: 0, missingPackets: 0, retransmissions: self.retransmissions, deliveredPackets: 0,
                typicalPayload: typical)
            for (hole, count) in self.holes {
                loss.holes += count
                loss.missingPackets += count * max(1, (hole + typical / 2) / typical)
            }
            for (payload, count) in self.delivered {
                loss.deliveredPackets += count * max(1, (Int(payload) + typical - 1) / typical)
            }
            return loss
        }
    }

    /// Gaps between arrivals longer than max(200 ms, 4 × the median gap): all gaps are counted,
    /// and only those over 50 ms kept (a median at or below 50 ms leaves the threshold at 200 ms).
    struct IdleState {
        static let kept: Int64 = 50_000_000
        var first: Int64?
        var previous: Int64 = 0
        var gaps = 0
        var small = 0
        var large: [(start: Int64, length: Int64)] = []

        mutating func add(_ time: Int64) {
            guard self.first != nil else {
                self.first = time
                self.previous = time
                return
            }
            let gap = max(0, time - self.previous)
            self.gaps += 1
            if gap <= Self.kept { self.small += 1 } else { self.large.append((self.previous, gap)) }
            self.previous = max(self.previous, time)
        }

        func result(start: Int64) -> TraceRecording.Idle {
            var median: Int64 = 0
            let middle = self.gaps / 2
            if self.gaps > 0 && middle >= self.small {
                median = self.large.map(\.length).sorted()[middle - self.small]
            }
            let threshold = max(200_000_000, 4 * median)
            var stretches: [TraceRecording.IdleStretch] = []
            // Before the first arrival (a --from ahead of the data) replays as no capacity too.
            if let first = self.first, first - start > threshold {
                stretches.append(
                    TraceRecording.IdleStretch(
                        start: Span(nanoseconds: start), length: Span(nanoseconds: first - start)))
            }
            for gap in self.large where gap.length > threshold {
                stretches.append(
                    TraceRecording.IdleStretch(
                        start: Span(nanoseconds: gap.start), length: Span(nanoseconds: gap.length)))
            }
            return TraceRecording.Idle(threshold: Span(nanoseconds: threshold), stretches: stretches)
        }
    }
}
