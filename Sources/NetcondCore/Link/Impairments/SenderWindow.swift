/// The emulated TCP sender's congestion window: how many bytes it may have in flight.
///
/// A proxy's loopback sockets never feel the emulated round trip, so the model plays the sender:
///
/// ```
///  cwnd ▲            slow start: +1 segment per acked segment (doubles every RTT)
///       │      ╱│    loss (cubic): cwnd × 0.7, then grows back along the cubic curve
///       │    ╱  │   ╱‾‾
///       │  ╱    │ ╱       timeout: cwnd = 1 segment, slow start again
///       │╱      │╱
///       └──────────────▶ time
/// ```
/// `cubic` follows RFC 8312 (C = 0.4, β = 0.7, with the Reno-friendly region), unpaced as Linux
/// sends it without the fq qdisc, so goodput under random loss falls as loss-based congestion
/// control makes it fall; its slow start ends early when the round trip grows (``HyStart``), as
/// Linux's does. `bbr` grows to twice the path's bandwidth-delay
/// product and ignores loss; the link model also paces it at the bottleneck rate, as BBR paces.
struct SenderWindow {
    private let algorithm: CongestionControl
    private var mss: Double
    /// Upper bound of the window: the receiver's advertised window.
    private let receiveWindow: Double
    /// BBR's target: 2 × bandwidth × base RTT (nil when the path has no rate limit).
    private var bbrTarget: Double?

    /// Window in bytes.
    private(set) var cwnd: Double
    private var ssthresh: Double = .infinity
    // CUBIC state (in segments and seconds, as in RFC 8312).
    private var wMax: Double = 0
    private var lastWMax: Double = 0
    private var epochStart: Instant?
    private var k: Double = 0
    private var wEst: Double = 0
    private var hystart = HyStart()

    static let initialSegments = 10.0
    static let cubicC = 0.4
    static let cubicBeta = 0.7

    init(algorithm: CongestionControl, mss: Int, receiveWindow: Int, bandwidth: Bandwidth?, baseRTT: Span) {
        self.algorithm = algorithm
        self.mss = Double(mss)
        self.receiveWindow = Double(receiveWindow)
        self.bbrTarget = Self.bbrTarget(mss: mss, bandwidth: bandwidth, baseRTT: baseRTT)
        self.cwnd = Self.initialSegments * Double(mss)
    }

    private static func bbrTarget(mss: Int, bandwidth: Bandwidth?, baseRTT: Span) -> Double? {
        guard let bandwidth, baseRTT > .zero else { return nil }
        let bdp = Double(bandwidth.bitsPerSecond) / 8 * baseRTT.seconds
        return max(2 * bdp, 4 * Double(mss))
    }

    /// The path changed (a schedule phase or a live switch): the window keeps its size in
    /// segments; BBR re-targets twice the new bandwidth-delay product (as it would after probing).
    mutating func retarget(mss: Int, bandwidth: Bandwidth?, baseRTT: Span) {
        let newMSS = Double(mss)
        if newMSS != self.mss {
            self.cwnd = self.cwnd / self.mss * newMSS
            if self.ssthresh.isFinite { self.ssthresh = self.ssthresh / self.mss * newMSS }
            self.mss = newMSS
        }
        self.bbrTarget = Self.bbrTarget(mss: mss, bandwidth: bandwidth, baseRTT: baseRTT)
        if self.algorithm == .bbr, let target = self.bbrTarget { self.cwnd = min(self.cwnd, target) }
    }

    /// Bytes the sender may have outstanding now.
    var allowance: Double { min(self.cwnd, self.receiveWindow) }

    /// `bytes` newly acknowledged at `now`; `rtt` is the sender's smoothed round trip. For
    /// HyStart: the segment acknowledged (`seq`), the next one to be sent, and the RTT sample the
    /// acknowledgement gave (nil for a retransmitted segment's).
    mutating func onAck(bytes: Int, now: Instant, rtt: Span, seq: UInt64 = 0, nextSeq: UInt64 = 0, sample: Span? = nil)
    {
        let acked = Double(bytes)
        switch self.algorithm {
        case .bbr:
            let target = self.bbrTarget ?? .infinity
            if self.cwnd < target { self.cwnd = min(self.cwnd + acked, target) }
        case .cubic:
            if self.cwnd < self.ssthresh {
                self.cwnd += acked
                if self.hystart.shouldExit(seq: seq, nextSeq: nextSeq, sample: sample, segments: self.cwnd / self.mss) {
                    self.ssthresh = self.cwnd
                }
                return
            }
            self.cubicAvoidance(ackedBytes: acked, now: now, rtt: rtt)
        }
        self.cwnd = min(self.cwnd, self.receiveWindow)
    }

    private mutating func cubicAvoidance(ackedBytes: Double, now: Instant, rtt: Span) {
        let segments = self.cwnd / self.mss
        if self.epochStart == nil {
            self.epochStart = now
            if segments < self.wMax {
                self.k = cbrt((self.wMax - segments) / Self.cubicC)
            } else {
                self.k = 0
                self.wMax = segments
            }
            self.wEst = segments
        }
        let t = (now - self.epochStart!).seconds + rtt.seconds
        let target = Self.cubicC * pow(t - self.k, 3) + self.wMax
        let ackedSegments = ackedBytes / self.mss
        // Reno-friendly estimate: α = 3(1−β)/(1+β) segments per RTT.
        let alpha = 3 * (1 - Self.cubicBeta) / (1 + Self.cubicBeta)
        self.wEst += alpha * ackedSegments / segments
        var next = segments
        if target > segments {
            next += min(target - segments, segments / 2) * ackedSegments / segments
        } else {
            next += 0.01 * ackedSegments / segments
        }
        next = max(next, self.wEst)
        self.cwnd = next * self.mss
    }

    /// The sender detected a loss by duplicate acknowledgements (fast retransmit).
    mutating func onFastRetransmit() {
        guard self.algorithm == .cubic else { return }
        let segments = self.cwnd / self.mss
        // Fast convergence (RFC 8312 §4.6).
        if segments < self.lastWMax {
            self.lastWMax = segments
            self.wMax = segments * (1 + Self.cubicBeta) / 2
        } else {
            self.lastWMax = segments
            self.wMax = segments
        }
        self.cwnd = max(self.cwnd * Self.cubicBeta, 2 * self.mss)
        self.ssthresh = self.cwnd
        self.epochStart = nil
    }

    /// The retransmission timer fired: start again from one segment. Within a recovery that already
    /// reduced the window, the threshold stays where that reduction put it (as Linux does).
    mutating func onTimeout(reduceThreshold: Bool) {
        guard self.algorithm == .cubic else { return }
        if reduceThreshold {
            self.lastWMax = self.cwnd / self.mss
            self.wMax = self.lastWMax
            self.ssthresh = max(self.cwnd * Self.cubicBeta, 2 * self.mss)
        }
        self.cwnd = self.mss
        self.epochStart = nil
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
