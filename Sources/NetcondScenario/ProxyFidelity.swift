import Foundation
import NetcondCore

/// What the proxy could not show a client as a real network would, and which verdicts rest on it.
///
/// A client under the stream engine talks to netcond's proxy, whose connection it opens at once.
/// When the network refuses a connection, or swallows it in a blackhole, the proxy can only end or
/// leave unanswered a connection the client already has:
///
/// ```
///                     real network                       through the proxy
///  refused            connect() fails: ECONNREFUSED      connect ok, request sent, then a reset
///  blackholed         connect() hangs; its time-out      connect ok, request sent, no answer;
///                     fires                              only a read time-out can fire
///  timed out (127 s)  connect() fails: ETIMEDOUT         a reset after 127 s
///  held, then made    connect() waits; its time-out      connect ok at once, the request waits;
///  (blackhole, loss)  may fire first                     only a read time-out can fire
///  no such name       the client's own lookup fails      a 502 from netcond
/// ```
///
/// A client that treats the two sides alike is judged as a network would judge it; one that does
/// not (curl's `--retry-connrefused`, wget's refusal rule, a connect time-out) may not be. Checks
/// that can rest on such attempts carry a caveat saying which ones the client met, so a verdict
/// never claims more than it measured. The packet engine carries the client's own packets, so
/// these failures are the network's own there and no caveat is given.
enum ProxyFidelity {
    /// The caveat for one check of a run (nil when the check does not rest on such events, or
    /// when none happened, or the engine showed them exactly).
    static func caveat(for spec: CheckSpec, _ evidence: RunEvidence) -> String? {
        guard evidence.engine == .stream else { return nil }
        switch spec {
        // `delivers`: how the client met the outage decides whether it queued and retried.
        case .backsOff, .completes, .staysUsable, .captiveSafe, .reconnects, .delivers: break
        case .resumes, .idempotent: return nil
        // What the origin's log says of each request (its validator, the origin's 304): nothing
        // the way the proxy shows connections can change.
        case .revalidates: return nil
        // When each request reached the origin and its answer left it: the same link lies between
        // the client and the origin in both engines.
        case .overlaps: return nil
        case .radio(let check): return Self.radioCaveat(check, evidence)
        }
        var refused = 0, silent = 0, timedOut = 0, names = 0
        for attempt in evidence.failedConnects {
            switch attempt.outcome {
            case .refused, .reset: refused += 1
            case .timedOut: timedOut += 1
            case .noSuchName: names += 1
            case .unanswered, .noAnswer, .abandoned: silent += 1
            // An IPv6-only network is the packet engine's alone.
            case .noIPv4Address, .noIPv4Route: break
            }
        }
        var parts: [String] = []
        if refused > 0 {
            parts.append(
                "\(Self.count(refused, "refused connection")) reached the client as a reset after its connect to netcond had succeeded and its request was sent (a network refuses the connect itself, ECONNREFUSED, which clients may retry differently: curl's --retry-connrefused, wget)"
            )
        }
        if silent > 0 {
            // Named as what happened: a blackhole only when the link recorded one.
            let blackholed = evidence.linkEvents.contains { $0.detail.contains("blackhole") }
            parts.append(
                "\(Self.count(silent, "attempt")) \(blackholed ? "into a blackhole" : "the link held without an answer") met a connection netcond accepted at once and never answered (on a network the connect itself hangs, and a connect time-out such as curl's --connect-timeout fires; here only a read time-out can)"
            )
        }
        if timedOut > 0 {
            parts.append(
                "\(Self.count(timedOut, "connection")) that timed out reached the client as a reset (a network fails the connect with ETIMEDOUT)"
            )
        }
        if let longest = evidence.heldConnects.map(\.heldFor).max() {
            let n = evidence.heldConnects.count
            parts.append(
                "\(Self.count(n, "connection")) to the origin \(n == 1 ? "was" : "were") held up to \(Self.seconds(longest)) by the link (its request or SYNs swallowed by a blackhole or lost, or a held connect) while the client's connect to netcond had already succeeded (on a network the connect itself waits, and a connect time-out shorter than that, such as curl's --connect-timeout, fires; here it cannot)"
            )
        }
        if case .reconnects(let check) = spec, !evidence.handovers.isEmpty, !Checks.reconnects(check, evidence).passed {
            parts.append(
                "a connection a handover stranded was the client's own to netcond, on loopback, which took all it sent: TCP keepalive or a TCP_USER_TIMEOUT, which notice a path that is gone on a network, cannot fire here (a read time-out can)"
            )
        }
        if names > 0 {
            parts.append(
                "\(Self.count(names, "name")) that did not resolve reached the client as a 502 from netcond (on a network the client's own lookup fails)"
            )
        }
        guard !parts.isEmpty else { return nil }
        return "through the proxy, " + parts.joined(separator: "; ")
            + ". A client that treats these differently may be judged differently on a real network."
    }

    private static func seconds(_ value: Double) -> String {
        value < 10 ? "\((value * 10).rounded() / 10) s" : "\(Int(value.rounded())) s"
    }

    private static func count(_ n: Int, _ noun: String) -> String {
        "\(n) \(noun)\(n == 1 ? "" : "s")"
    }
}

extension ProxyFidelity {
    /// How near a limit a radio verdict may be before the proxy's view could have decided it.
    static let radioShareMargin = 0.05

    /// The proxy engine's radio sees the emulated connections' segments and handshakes to the
    /// servers, not the client's own packets: no acknowledgements, no closing handshakes, no DNS.
    /// Those come within milliseconds of a segment it does see, so the radio's on time differs by
    /// a few milliseconds a transfer, unless a connection closed while the radio slept (a
    /// server's idle time-out): that wakes a real radio once more. Verdicts far from their limits
    /// stand; one within 5 points of the on-share limit, or within one promotion of the
    /// promotions' limit, says so.
    static func radioCaveat(_ check: RadioCheck, _ evidence: RunEvidence) -> String? {
        // A radio that never woke saw no traffic: the client sent nothing the proxy could miss.
        guard let radio = evidence.radio, radio.promotions > 0 else { return nil }
        var near: [String] = []
        if let share = check.maxOnShare, abs(radio.onShare - share.value) < Self.radioShareMargin {
            near.append("on \(Checks.percent(radio.onShare)) against \(Checks.percent(share.value))")
        }
        if let rate = check.maxPromotionsPerMinute, radio.window > 0 {
            let allowed = rate * radio.window / 60
            if abs(Double(radio.promotions) - allowed) < 1 {
                near.append(
                    "\(radio.promotions) promotion\(radio.promotions == 1 ? "" : "s") against "
                        + "\(String(format: "%.1f", allowed)) allowed in the run")
            }
        }
        guard !near.isEmpty else { return nil }
        return "through the proxy, the radio saw the segments the link carried to the servers, not the client's own "
            + "packets (its acknowledgements, connection closes and DNS), and this verdict is close to its limit ("
            + near.joined(separator: "; ")
            + "): a few packets more or less could change it; --engine packet (root) follows the client's own packets"
    }
}
