import NetcondCore

/// What netcond sends in a server's place: the resets of a cut or a refusal, and the answers to
/// lookups `dns_fail` fails.
extension PacketLinkDriver {
    /// Cuts every TCP connection on the link (`route` nil: a cut or reset outage of the access
    /// link), or every one on `route` (its reset outage), with a reset to each end, as a middlebox
    /// that drops the connections would: each reset reaches its end after that direction's delay in
    /// force on the connection's path (the access link's, and its route's), with the sequence number
    /// the end expects then. Returns how many connections.
    @discardableResult
    mutating func cutConnections(route: Int? = nil, at now: Instant) -> Int {
        var cut = 0
        for key in self.flows.keys {
            let on = self.tcpRoutes.route(of: key)
            if let route, on != route { continue }
            self.flows.markCut(key)
            self.scheduleReset(key, towardCage: true, at: now + self.network.delay(.down, route: on, at: now))
            self.scheduleReset(key, towardCage: false, at: now + self.network.delay(.up, route: on, at: now))
            if let on { self.summary.laneCounts[on].connectionsCut += 1 }
            cut += 1
        }
        self.summary.connectionsCut += cut
        return cut
    }

    /// `answering`: the reset answers a SYN (RST|ACK acknowledging it, sequence 0).
    mutating func scheduleReset(
        _ key: FlowKey, towardCage: Bool, at moment: Instant, answering syn: UInt32? = nil
    ) {
        self.sequence += 1
        self.resets.insert(
            ScheduledReset(at: moment, sequence: self.sequence, key: key, towardCage: towardCage, answering: syn))
    }

    /// The next reset due by `now`, addressed, with the sequence number its end expects (a cut
    /// connection's end that has gone quiet since is skipped).
    mutating func dueReset(upTo now: Instant) -> ResetToSend? {
        while let next = self.resets.min, next.at <= now {
            _ = self.resets.removeMin()
            let key = next.key
            var seq: UInt32 = 0
            var ack: UInt32 = 0
            if let syn = next.answering {
                ack = syn
            } else {
                let expected = self.flows.resetSequence(key, towardCage: next.towardCage)
                self.flows.resetSent(key, towardCage: next.towardCage)
                guard let expected else { continue }
                seq = expected
            }
            let length = key.version == 6 ? 16 : 4
            let cage = key.cage.bytes(count: length)
            let far = key.far.bytes(count: length)
            return next.towardCage
                ? ResetToSend(
                    version: key.version, source: far, sourcePort: key.farPort, destination: cage,
                    destinationPort: key.cagePort, seq: seq, ack: ack, answersSYN: next.answering != nil)
                : ResetToSend(
                    version: key.version, source: cage, sourcePort: key.cagePort, destination: far,
                    destinationPort: key.farPort, seq: seq, ack: ack, answersSYN: next.answering != nil)
        }
        return nil
    }

    /// The next packet due by `now` that netcond sends in a server's place.
    mutating func dueInjected(upTo now: Instant) -> [UInt8]? {
        guard let next = self.injected.min, next.at <= now else { return nil }
        return self.injected.removeMin().bytes
    }
}

/// A reset for the engine to send.
struct ResetToSend: Equatable {
    var version: UInt8
    var source: [UInt8]
    var sourcePort: UInt16
    var destination: [UInt8]
    var destinationPort: UInt16
    var seq: UInt32
    var ack: UInt32
    /// It answers a SYN (RST|ACK).
    var answersSYN: Bool
}

/// A packet netcond sends in a server's place at a moment.
struct InjectedPacket: Comparable {
    var at: Instant
    var sequence: UInt64
    var bytes: [UInt8]

    static func < (a: InjectedPacket, b: InjectedPacket) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
    static func == (a: InjectedPacket, b: InjectedPacket) -> Bool { a.sequence == b.sequence }
}

/// A reset netcond sends to one end of a connection at a moment.
struct ScheduledReset: Comparable {
    var at: Instant
    var sequence: UInt64
    var key: FlowKey
    var towardCage: Bool
    /// The acknowledgement of a refused SYN (the reset answers it), or nil for a cut.
    var answering: UInt32?

    static func < (a: ScheduledReset, b: ScheduledReset) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
    static func == (a: ScheduledReset, b: ScheduledReset) -> Bool { a.sequence == b.sequence }
}
