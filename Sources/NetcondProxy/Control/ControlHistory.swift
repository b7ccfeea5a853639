import Foundation

/// What the dashboard draws, kept by netcond so that a page opened late still shows what happened:
/// the last ``capacity`` samples of `/status` (one every ``interval``, 10 minutes), each turned
/// into the rates of the interval before it, and the moments the link changed (an outage, a stall,
/// a profile, the captive portal) or a fault hit, found by comparing consecutive samples.
///
/// A change that starts and ends between two samples (under half a second) is not seen; the marks
/// are as precise as the interval.
public struct ControlHistory: Sendable, Equatable {
    public static let interval = 0.5
    public static let capacity = 1_200
    static let markCapacity = 500

    /// One interval's numbers.
    public struct Sample: Codable, Sendable, Equatable {
        /// Seconds since the run started (its end).
        public var t: Double
        /// Down bytes the link carried (``ControlStatus/linkBytesDown``: delivered, or arrived and held
        /// behind a hole until its repair) and up bytes carried, in kbit/s over the interval.
        public var downKbps: Double
        public var upKbps: Double
        /// How long a byte queued at the bottleneck waits, down and up, in ms (the moment's; nil
        /// where the engine does not say).
        public var queueDownMs: Double?
        public var queueUpMs: Double?
        /// Segments lost (on the link, to the queue, in an outage) and retransmitted, per second.
        public var lostPerSecond: Double
        public var retransmittedPerSecond: Double
        public var connectionsOpen: Int

        /// Every key always there (`null` for a queue delay the engine does not say).
        public func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.t, forKey: .t)
            try container.encode(self.downKbps, forKey: .downKbps)
            try container.encode(self.upKbps, forKey: .upKbps)
            try container.encode(self.queueDownMs, forKey: .queueDownMs)
            try container.encode(self.queueUpMs, forKey: .queueUpMs)
            try container.encode(self.lostPerSecond, forKey: .lostPerSecond)
            try container.encode(self.retransmittedPerSecond, forKey: .retransmittedPerSecond)
            try container.encode(self.connectionsOpen, forKey: .connectionsOpen)
        }

        enum CodingKeys: String, CodingKey {
            case t
            case downKbps = "down_kbps"
            case upKbps = "up_kbps"
            case queueDownMs = "queue_down_ms"
            case queueUpMs = "queue_up_ms"
            case lostPerSecond = "lost_per_s"
            case retransmittedPerSecond = "retransmitted_per_s"
            case connectionsOpen = "connections_open"
        }
    }

    /// A moment the link changed, or a fault hit.
    public struct Mark: Codable, Sendable, Equatable {
        /// What happened; the raw values are the JSON's `kind`.
        public enum Kind: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
            case profile
            case outage
            case outageEnd = "outage-end"
            case stall
            case stallEnd = "stall-end"
            case portal
            case fault

            public var description: String { self.rawValue }
        }

        public var t: Double
        public var kind: Kind
        public var detail: String
    }

    public private(set) var samples: [Sample] = []
    public private(set) var marks: [Mark] = []
    private var last: ControlStatus?

    public init() {}

    /// Adds a `/status` snapshot: a sample of the interval since the one before, and the marks of
    /// what changed in between.
    public mutating func add(_ status: ControlStatus) {
        defer { self.last = status }
        let queue = status.queueDelayMs
        guard let last = self.last, status.elapsedSeconds > last.elapsedSeconds else {
            if self.last == nil { self.mark(status.elapsedSeconds, .profile, status.profile) }
            return
        }
        let dt = max(0.05, status.elapsedSeconds - last.elapsedSeconds)
        func perSecond(_ now: Int64, _ before: Int64) -> Double { Double(max(0, now - before)) / dt }
        let lost =
            (status.segmentsLost + status.queueDrops + status.outageDrops)
            - (last.segmentsLost + last.queueDrops + last.outageDrops)
        self.samples.append(
            Sample(
                t: Self.rounded(status.elapsedSeconds),
                downKbps: Self.rounded(perSecond(Self.carriedDown(status), Self.carriedDown(last)) * 8 / 1000),
                upKbps: Self.rounded(perSecond(status.bytesUp, last.bytesUp) * 8 / 1000),
                queueDownMs: queue.flatMap { $0.count > 1 ? Self.rounded($0[1]) : nil },
                queueUpMs: queue.flatMap { $0.first.map(Self.rounded) },
                lostPerSecond: Self.rounded(perSecond(Int64(lost), 0)),
                retransmittedPerSecond: Self.rounded(
                    perSecond(Int64(status.retransmissions), Int64(last.retransmissions))),
                connectionsOpen: status.connectionsOpen))
        if self.samples.count > Self.capacity {
            self.samples.removeFirst(self.samples.count - Self.capacity)
            // Marks before the oldest sample kept have nothing left to be drawn on.
            let oldest = self.samples[0].t - Self.interval
            self.marks.removeAll { $0.t < oldest }
        }

        let t = status.elapsedSeconds
        if status.profile != last.profile { self.mark(t, .profile, status.profile) }
        if status.outage != last.outage {
            if let outage = status.outage {
                self.mark(t, .outage, outage)
            } else {
                self.mark(t, .outageEnd, last.outage ?? "")
            }
        }
        if status.stalled != last.stalled {
            if status.stalled.isEmpty {
                self.mark(t, .stallEnd, last.stalled.joined(separator: ", "))
            } else {
                self.mark(t, .stall, status.stalled.joined(separator: ", "))
            }
        }
        if status.captivePortal != last.captivePortal, let portal = status.captivePortal {
            self.mark(t, .portal, portal)
        }
        if status.faultsApplied > last.faultsApplied {
            let hits = status.faultsApplied - last.faultsApplied
            self.mark(t, .fault, "\(hits) request\(hits == 1 ? "" : "s") hit")
        }
        if self.marks.count > Self.markCapacity { self.marks.removeFirst(self.marks.count - Self.markCapacity) }
    }

    private mutating func mark(_ t: Double, _ kind: Mark.Kind, _ detail: String) {
        self.marks.append(Mark(t: Self.rounded(t), kind: kind, detail: detail))
    }

    private static func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    /// The down bytes the link carried by a status. Not those delivered: a receiver passes bytes on
    /// in order, so after a loss behind a full queue (half a second of it) the bytes that came
    /// meanwhile wait for the repair, then go at once: a steady download drew 0, then twice the
    /// link's rate, while the link was busy at its rate throughout.
    static func carriedDown(_ status: ControlStatus) -> Int64 { status.linkBytesDown ?? status.bytesDelivered }

    /// `GET /history[?since=T]`: the samples and marks after `since` (all without it).
    public func json(since: Double?) -> [UInt8] {
        let since = since ?? -.infinity
        return HistoryAnswer(
            intervalSeconds: Self.interval,
            samples: self.samples.filter { $0.t > since },
            marks: self.marks.filter { $0.t > since }
        ).controlJSON()
    }

    struct HistoryAnswer: Codable {
        var intervalSeconds: Double
        var samples: [Sample]
        var marks: [Mark]

        enum CodingKeys: String, CodingKey {
            case samples, marks
            case intervalSeconds = "interval_seconds"
        }
    }
}
