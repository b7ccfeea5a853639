/// What ``TraceRecorder`` found in a capture, and the files and report it makes of it: a mahimahi
/// trace, a profile that uses it, and lines saying how each number was derived.
public struct TraceRecording: Sendable, Equatable {
    /// The rate of each whole second of the window, kept as the seconds that carried data (the
    /// others carried none): a window of idle months costs a few entries.
    public struct PerSecondRates: Sendable, Equatable {
        public var wholeSeconds: Int
        /// The rates of the seconds with data, lowest first.
        public var busy: [Bandwidth]

        public init(wholeSeconds: Int, busy: [Bandwidth]) {
            self.wholeSeconds = wholeSeconds
            self.busy = busy.sorted()
        }

        /// The `p`th percentile of every whole second's rate, the idle ones (0) included.
        public func percentile(_ p: Int) -> Bandwidth {
            let index = min(self.wholeSeconds - 1, (self.wholeSeconds * p + 99) / 100 - 1)
            let idle = self.wholeSeconds - self.busy.count
            return index < idle ? Bandwidth(bitsPerSecond: 0) : self.busy[index - idle]
        }
    }

    public var client: CapturedSegment.Endpoint
    public var server: CapturedSegment.Endpoint
    /// True when a SYN told the client; else it is the side that sent less.
    public var clientBySYN: Bool
    public var direction: Direction
    /// The window, from the capture's first packet.
    public var windowStart: Span
    public var windowEnd: Span
    public var captureDuration: Span
    /// Data packets of the chosen direction in the window, and their bytes.
    public var packets: Int
    public var ipBytes: Int64
    public var payloadBytes: Int64
    /// The opportunities, from the window's start.
    public var trace: OpportunityTimes
    /// IP bytes over the window's length.
    public var meanRate: Bandwidth
    /// The rate in each whole second of the window.
    public var perSecondRates: PerSecondRates
    public var delay: Delay
    public var loss: Loss
    public var idle: Idle
    /// Packets read, TCP packets among them, and connections.
    public var records: Int
    public var tcpPackets: Int
    public var connections: Int

    /// The handshake's three moments, from the capture's first packet.
    public struct Handshake: Sendable, Equatable {
        public var syn: Span
        public var synAck: Span
        public var ack: Span
        public var roundTrip: Span { self.ack - self.syn }
    }

    /// The one-way delays, and how they were derived.
    public enum Delay: Sendable, Equatable {
        /// Both handshake legs long and alike: the capture was made between the ends, each leg a direction's delay.
        case midLink(Handshake, down: Span, up: Span)
        /// Captured at an end: half the round trip each way.
        case halfRoundTrip(Handshake, oneWay: Span)
        /// No handshake in the capture: no latency is written (the shortest data→ACK spacing is shown).
        case unknown(smallestDataToAck: Span?)

        /// The one-way delay of `direction`, when known.
        public func latency(_ direction: Direction) -> Span? {
            switch self {
            case .midLink(_, let down, let up): return direction == .down ? down : up
            case .halfRoundTrip(_, let oneWay): return oneWay
            case .unknown: return nil
            }
        }
    }

    /// Loss seen as holes in the chosen direction's sequence numbers.
    public struct Loss: Sendable, Equatable {
        public var holes: Int
        /// Hole bytes in typical segments (at least one per hole).
        public var missingPackets: Int
        /// Segments entirely below what had already arrived.
        public var retransmissions: Int
        /// Segments that arrived (a merged packet counts its typical segments).
        public var deliveredPackets: Int
        public var typicalPayload: Int

        public var probability: Probability {
            let total = self.deliveredPackets + self.missingPackets
            return total == 0 ? .zero : Probability(Double(self.missingPackets) / Double(total))
        }
    }

    /// Stretches without arrivals, which replay as no capacity.
    public struct Idle: Sendable, Equatable {
        /// Longer than this counts: max(200 ms, 4 × the median gap between arrivals).
        public var threshold: Span
        public var stretches: [IdleStretch]
        public var total: Span { self.stretches.reduce(.zero) { $0 + $1.length } }
        public var longest: IdleStretch? { self.stretches.max { $0.length < $1.length } }
    }

    public struct IdleStretch: Sendable, Equatable {
        /// From the capture's first packet.
        public var start: Span
        public var length: Span
    }

    // MARK: - Files

    /// The trace file: one whole millisecond per line, a line per opportunity (``OpportunityTimes/fileText(piecesOf:_:)`` writes it in pieces).
    public var traceText: String {
        var text = ""
        self.trace.fileText { text += $0 }
        return text
    }

    /// The loss written into the profile, when it rounds to something.
    public var writtenLoss: Probability? {
        let loss = self.loss.probability
        return loss.description == "0%" ? nil : loss
    }

    /// A profile using the trace (`traceFile` as the profile names it: beside it).
    public func profileYAML(name: String, traceFile: String, captureName: String) -> String {
        let recorded = self.direction
        var lines = [
            "name: \(Self.quoted(name))",
            "description: \(Self.quoted("Recorded from \(captureName): \(self.meanRate) mean \(recorded), round trip \(self.roundTripText)"))",
            "source: \(Self.quoted("\(captureName), flow \(self.client) -> \(self.server), \(self.windowText); recorded by netcond trace record"))",
        ]
        if case .unknown = self.delay {
            lines.append(
                "# No handshake in the capture: the delay is unknown, so no latency is set; "
                    + "set each direction's latency yourself."
            )
        }
        for direction in [Direction.down, Direction.up] {
            var keys: [String] = []
            if direction == recorded { keys.append("  trace: \(Self.quoted(traceFile))") }
            if let latency = self.delay.latency(direction) { keys.append("  latency: \(latency)") }
            if direction == recorded, let loss = self.writtenLoss { keys.append("  loss: \(loss)") }
            if !keys.isEmpty { lines += ["\(direction):"] + keys }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A double-quoted YAML string.
    static func quoted(_ text: String) -> String {
        let escaped = TerminalText.escaped(
            text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))
        return "\"\(escaped)\""
    }

    // MARK: - Report

    var roundTripText: String {
        switch self.delay {
        case .midLink(let handshake, _, _), .halfRoundTrip(let handshake, _): return "\(Self.ms(handshake.roundTrip))"
        case .unknown: return "unknown"
        }
    }

    var windowText: String {
        "\(Self.seconds(self.windowStart)) s to \(Self.seconds(self.windowEnd)) s of the capture"
    }

    /// The report's lines: what was recorded and how each number was derived. `loaded` is the
    /// trace as the written profile reads back.
    public func report(traceFile: String, profileFile: String, loaded: LinkTrace) -> [String] {
        let toward = self.direction == .down ? "toward the client" : "toward the server"
        let told =
            self.clientBySYN
            ? "the client sent the SYN" : "no SYN in the capture: the client is the side that sent less"
        var lines = [
            "flow:        \(self.client) -> \(self.server) (\(told)); recorded \(self.direction), \(toward)",
            "window:      \(self.windowText) "
                + "(\(Self.seconds(self.windowEnd - self.windowStart)) s of \(Self.seconds(self.captureDuration)) s)",
            "packets:     \(self.packets) data packets, \(Self.bytes(self.ipBytes)) on the wire "
                + "(\(Self.bytes(self.payloadBytes)) of payload)",
        ]
        var rate = "rate:        mean \(self.meanRate)"
        let rates = self.perSecondRates
        if rates.wholeSeconds > 0 {
            rate +=
                "; per second p10 \(rates.percentile(10)), p50 \(rates.percentile(50)), p90 \(rates.percentile(90)) "
            rate += "(\(rates.wholeSeconds) whole seconds)"
        }
        lines.append(rate)
        lines += self.delayLines
        let loss = self.loss
        lines.append(
            "loss:        \(loss.probability) (\(loss.holes) hole\(loss.holes == 1 ? "" : "s") in the sequence, "
                + "\(loss.missingPackets) packets of \(loss.typicalPayload) B missing, \(loss.deliveredPackets) arrived; "
                + "\(loss.retransmissions) retransmission\(loss.retransmissions == 1 ? "" : "s"))")
        if let longest = self.idle.longest {
            let count = self.idle.stretches.count
            lines.append(
                "idle:        warning: \(count) stretch\(count == 1 ? "" : "es") without arrivals over "
                    + "\(Self.ms(self.idle.threshold)), \(Self.seconds(self.idle.total)) s in all, the longest "
                    + "\(Self.seconds(longest.length)) s at \(Self.seconds(longest.start)) s: the download did not fill "
                    + "the path then, and those seconds replay as no capacity"
            )
        } else {
            lines.append("idle:        none over \(Self.ms(self.idle.threshold)): the download kept the path busy")
        }
        lines.append(
            "wrote:       \(traceFile) (\(loaded.opportunityCount) opportunities, period "
                + "\(Self.seconds(.milliseconds(loaded.periodMilliseconds))) s, mean \(loaded.meanRate)), \(profileFile)"
        )
        lines.append("run it:      netcond run \(profileFile) -- ./client")
        return lines
    }

    var delayLines: [String] {
        switch self.delay {
        case .midLink(let handshake, let down, let up):
            return [
                Self.roundTripLine(handshake),
                "delay:       down \(down), up \(up): the capture looks mid-link (both handshake legs over 1 ms and within 10x "
                    + "of each other), so SYN to SYN-ACK is the down delay and SYN-ACK to ACK the up one",
            ]
        case .halfRoundTrip(let handshake, let oneWay):
            let first = handshake.synAck - handshake.syn
            let second = handshake.ack - handshake.synAck
            let at =
                second < first
                ? "captured near the client: its ACK followed the SYN-ACK within \(Self.ms(second))"
                : "captured near the server: its SYN-ACK followed the SYN within \(Self.ms(first))"
            return [
                Self.roundTripLine(handshake),
                "delay:       down \(oneWay), up \(oneWay): half the round trip each way (\(at))",
            ]
        case .unknown(let spacing):
            var line = "delay:       unknown: the capture holds no handshake (it began after the connection opened), "
            line += "so the profile sets no latency"
            if let spacing {
                line += "; the shortest data-to-ACK spacing is \(Self.ms(spacing)) "
                line += "(a round trip if captured at the sender, near 0 at the receiver)"
            }
            return ["round trip:  unknown", line]
        }
    }

    /// `1234 B`, `56.8 kB`, `201.58 MB` (decimal multiples, as rates are).
    static func bytes(_ count: Int64) -> String {
        if count >= 1_000_000 { return "\(formatTrimmed((Double(count) / 10_000).rounded() / 100)) MB" }
        if count >= 1_000 { return "\(formatTrimmed((Double(count) / 100).rounded() / 10)) kB" }
        return "\(count) B"
    }

    static func roundTripLine(_ handshake: Handshake) -> String {
        "round trip:  \(Self.ms(handshake.roundTrip)) (SYN at \(Self.seconds(handshake.syn)) s, "
            + "SYN-ACK \(Self.ms(handshake.synAck - handshake.syn)) later, its ACK \(Self.ms(handshake.ack - handshake.synAck)) after that)"
    }

    static func seconds(_ span: Span) -> String { String(format: "%.3f", span.seconds) }

    static func ms(_ span: Span) -> String {
        "\(formatTrimmed((span.milliseconds * 1_000).rounded() / 1_000)) ms"
    }
}
