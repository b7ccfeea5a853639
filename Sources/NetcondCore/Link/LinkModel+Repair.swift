/// The receiving end of the stream engine's segments and TCP's repair of the lost ones: in-order
/// delivery behind a hole, duplicate acknowledgements that reveal it (fast retransmit), the
/// retransmission timer (with backoff), and the congestion window's response to each.
extension LinkModel {
    // MARK: - Receiver

    func arrive(_ flow: Flow, _ side: FlowSide, seq: UInt64, generation: Int) {
        guard side.hasRecord(seq) else { return }
        var record = side.record(seq)
        guard record.state == .inFlight, record.generation == generation else { return }
        record.state = .arrived
        record.arrivedAt = self.now
        side.setRecord(seq, record)
        switch side.direction {
        case .up: self.counters.bytesArrivedUp += Int64(record.size)
        case .down: self.counters.bytesArrivedDown += Int64(record.size)
        }

        // Data sent after a lost transmission arriving produces (selective) acknowledgements that
        // reveal the hole: three of them and the sender retransmits (SACK / RACK loss detection,
        // which also finds lost retransmissions). They take the reverse path back.
        let ackAt = self.ackArrival(flow, side)
        side.lastAckAt = ackAt
        for lostSeq in side.lostSeqs {
            var lost = side.record(lostSeq)
            guard lost.sentAt < record.sentAt, case .lost(let dupacks, let detectable) = lost.state, detectable
            else { continue }
            lost.state = .lost(dupacks: dupacks + 1, detectable: dupacks + 1 < 3)
            side.setRecord(lostSeq, lost)
            if dupacks + 1 == 3 {
                self.schedule(
                    .lossDetected(flow.id, side.direction, seq: lostSeq, generation: lost.generation),
                    at: ackAt
                )
            }
        }

        let sample: Span? = record.retransmitted ? nil : ackAt - record.sentAt
        self.schedule(.ack(flow.id, side.direction, seq: seq, bytes: record.size, rttSample: sample), at: ackAt)
        self.deliverInOrder(flow, side)
    }

    /// When an acknowledgement the receiver sends now reaches the sender: the reverse direction's
    /// delay in force on the connection's path (the access link's and its route's), plus each
    /// path's jitter drawn as its delay line draws it, and never before an earlier one (the
    /// kernel's senders under the packet engine meet jitter both ways, and CUBIC's HyStart reads
    /// the round trips it makes: `scripts/bench --only 11`, `wifi-lossy`).
    func ackArrival(_ flow: Flow, _ side: FlowSide) -> Instant {
        let way = self.links.way(side.direction.reversed, route: flow.route, at: self.now)
        var arrival = self.now + way.delay + side.drawAckJitter(way.accessJitter) + side.drawAckJitter(way.routeJitter)
        arrival = max(arrival, side.latestAckArrival)
        side.latestAckArrival = arrival
        return arrival
    }

    func deliverInOrder(_ flow: Flow, _ side: FlowSide) {
        var bytes = 0
        while let first = side.records.first, first.state == .arrived {
            bytes += first.size
            if first.retransmitted || first.arrivedAt < self.now { self.counters.segmentsDelayed += 1 }
            side.records.removeFirst()
            side.baseSeq += 1
        }
        guard bytes > 0 else { return }
        side.backlog -= bytes
        switch side.direction {
        case .up: self.counters.bytesUp += Int64(bytes)
        case .down: self.counters.bytesDown += Int64(bytes)
        }
        if let last = self.pendingDeliveries.last, last.flow == flow.id, last.direction == side.direction,
            last.at == self.now
        {
            self.pendingDeliveries[self.pendingDeliveries.count - 1].bytes += bytes
        } else {
            self.pendingDeliveries.append(
                Delivery(flow: flow.id, direction: side.direction, bytes: bytes, at: self.now))
        }
    }

    // MARK: - Loss and repair

    func markLost(_ flow: Flow, _ side: FlowSide, seq: UInt64) {
        var record = side.record(seq)
        record.state = .lost(dupacks: 0, detectable: true)
        side.setRecord(seq, record)
        let insertAt = side.lostSeqs.firstIndex(where: { $0 > seq }) ?? side.lostSeqs.endIndex
        side.lostSeqs.insert(seq, at: insertAt)
        let rto = min(side.retransmissionTimeout * Int64(1 << min(record.timeouts, 16)), Self.maxRTO)
        self.schedule(
            .timeout(flow.id, side.direction, seq: seq, generation: record.generation),
            at: record.sentAt + rto
        )
    }

    func repair(_ flow: Flow, _ side: FlowSide, seq: UInt64, generation: Int, byTimeout: Bool) {
        guard side.hasRecord(seq) else { return }
        var record = side.record(seq)
        guard case .lost = record.state, record.generation == generation else { return }
        if byTimeout, let lastAck = side.lastAckAt {
            // The timer restarts whenever an acknowledgement arrives (RFC 6298 §5.3): it fires only
            // after a full RTO of silence.
            let rto = min(side.retransmissionTimeout * Int64(1 << min(record.timeouts, 16)), Self.maxRTO)
            if lastAck + rto > self.now {
                self.schedule(.timeout(flow.id, side.direction, seq: seq, generation: generation), at: lastAck + rto)
                return
            }
        }
        if let index = side.lostSeqs.firstIndex(of: seq) { side.lostSeqs.remove(at: index) }

        let inRecovery = side.recoveryEnd.map { seq <= $0 } ?? false
        if byTimeout {
            self.counters.timeouts += 1
            record.timeouts += 1
            side.window.onTimeout(reduceThreshold: !inRecovery)
            side.recoveryEnd = side.nextSeq - 1
        } else if !inRecovery {
            side.window.onFastRetransmit()
            side.recoveryEnd = side.nextSeq - 1
        }
        self.counters.retransmissions += 1
        record.retransmitted = true
        record.generation += 1
        record.state = .inFlight
        record.sentAt = self.now
        side.setRecord(seq, record)
        self.transmit(flow, side, seq: seq)
        self.trySend(flow, side)
    }

    func ack(_ flow: Flow, _ side: FlowSide, seq: UInt64, bytes: Int, rttSample: Span?) {
        side.inflight -= bytes
        if let rttSample { side.updateRTT(rttSample) }
        if let end = side.recoveryEnd, seq > end { side.recoveryEnd = nil }
        if side.recoveryEnd == nil {
            side.window.onAck(
                bytes: bytes, now: self.now,
                rtt: side.smoothedRTT ?? self.links.roundTrip(route: flow.route, from: self.now),
                seq: seq, nextSeq: side.nextSeq, sample: rttSample)
        }
        self.trySend(flow, side)
    }
}
