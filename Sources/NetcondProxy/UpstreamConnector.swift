import NIOCore
import NIOPosix
import NetcondCore

/// Where a client wants to go.
package struct UpstreamTarget: Hashable, CustomStringConvertible {
    var host: String
    var port: Int

    package var description: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }

    /// True when `host` is a name (resolving it costs the profile's DNS delay), not an address literal.
    var isName: Bool {
        (try? SocketAddress(ipAddress: self.host, port: 0)) == nil
    }

    /// Parses `host:port`, `[v6]:port`, or `host` with a default port. Nil when malformed.
    package init?(authority: String, defaultPort: Int?) {
        var host = Substring(authority)
        var port = defaultPort
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if rest.hasPrefix(":") {
                port = Self.port(rest.dropFirst())
                if port == nil { return nil }
            } else if !rest.isEmpty {
                return nil
            }
        } else if let colon = host.firstIndex(of: ":") {
            // One colon, then digits only: `host:+80`, `host:1:1` and an unbracketed IPv6
            // address are not an authority.
            port = Self.port(host[host.index(after: colon)...])
            if port == nil { return nil }
            host = host[..<colon]
        }
        guard let port, (1...65535).contains(port), !host.isEmpty,
            host.allSatisfy({ $0.isLetter || $0.isNumber || "-._:%".contains($0) })
        else { return nil }
        self.host = String(host)
        self.port = port
    }

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// A port written as 1 to 5 decimal digits, nothing else (no sign, no spaces).
    private static func port(_ text: Substring) -> Int? {
        guard (1...5).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }
}

/// Why an upstream connection could not be made; each maps to an HTTP status and a SOCKS5 reply.
enum UpstreamError: Error, Equatable, CustomStringConvertible {
    /// The host, and why (nil: the resolver said so).
    case nameNotResolved(String, String? = nil)
    /// Refused, and why; `reset`: by a reset of a connection under way (a captive portal's),
    /// not a refusal of the SYN.
    case refused(UpstreamTarget, String, reset: Bool = false)
    case timedOut(UpstreamTarget)
    /// The client left while the connection was being made: it was given up at once, as a real
    /// client's kernel gives up a connect when its socket is closed.
    case abandoned(UpstreamTarget)
    /// The connection reached one of netcond's own listeners (under whatever name or spelling):
    /// what is sent on it would come back to this proxy, and round again.
    case loop(UpstreamTarget)

    var description: String {
        switch self {
        case .nameNotResolved(let host, let why):
            return "cannot resolve host '\(host)'" + (why.map { " (\($0))" } ?? "")
        case .refused(let target, let reason, _): return "cannot connect to \(target): \(reason)"
        case .timedOut(let target): return "connection to \(target) timed out (the emulated link lost every SYN)"
        case .abandoned(let target): return "connection to \(target) given up: the client left before it was made"
        case .loop(let target): return "refusing a connection to the proxy itself (\(target) is netcond's own listener)"
        }
    }

    /// How the attempt ended, for the event log.
    var outcome: AttemptOutcome {
        switch self {
        case .nameNotResolved: return .noSuchName
        case .refused(_, _, let reset): return reset ? .reset : .refused
        case .timedOut: return .timedOut
        case .abandoned: return .abandoned
        case .loop: return .refused
        }
    }

    /// The status of netcond's own answer, for the errors it answers itself (a name that does not
    /// resolve, a loop); the others reach the client as the network shows them, a reset.
    var httpStatus: Int {
        switch self {
        case .loop: return 400
        default: return 502
        }
    }

    /// RFC 1928 reply code.
    var socksReply: UInt8 {
        switch self {
        case .nameNotResolved: return 0x04  // host unreachable
        case .refused: return 0x05  // connection refused
        case .timedOut, .abandoned: return 0x06  // TTL expired (the closest code for a timeout)
        case .loop: return 0x02  // connection not allowed by ruleset
        }
    }
}

/// Names the proxy answers itself instead of asking DNS.
struct HostOverrides: Sendable {
    /// Exact names (lower-case) and the address they go to, e.g. `origin.netcond.test`.
    var exact: [String: SocketAddress] = [:]
    /// Any other `*.netcond.test` name goes here (the built-in origin).
    var netcondTest: SocketAddress?
    /// Where port 443 of a name under `netcond.test` goes: the origin's HTTPS listener (nil: not
    /// served).
    var originTLS: SocketAddress?

    func lookup(_ host: String) -> SocketAddress?? {
        let name = host.lowercased().trimmingSuffix(".")
        if let address = self.exact[name] { return .some(address) }
        if OriginHost.isOwn(name) { return .some(self.netcondTest) }
        if name == "invalid" || name.hasSuffix(".invalid") { return .some(nil) }
        return nil
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        self.hasSuffix(suffix) ? String(self.dropLast(suffix.count)) : self
    }
}

/// Opens upstream connections at the moment the emulated link would have them open.
///
/// The real connection (loopback or otherwise) starts when the first emulated SYN that reaches the
/// server leaves, never for an attempt the emulated network refuses, blackholes or holds; the caller is
/// answered only when both it and the emulated set-up (`LinkModel.connect`: DNS delay, SYN round
/// trip, SYN losses) are done, so a refusal is reported one emulated round trip after the SYN, as
/// on a real link.
struct UpstreamConnector {
    /// How long a real connect may take (a splice relay's connect waits as long).
    static let connectTimeout = TimeAmount.seconds(30)

    let eventLoop: EventLoop
    let driver: LinkDriver?
    let overrides: HostOverrides
    let stats: ProxyStats
    var rules: ProxyRules? = nil
    /// The client connection this connector serves (its upstream attempts are noted there).
    var client: ClientConnectionRecord? = nil
    /// netcond's own listeners: a connection that reaches one is refused (`UpstreamError.loop`).
    var listeners: [SocketAddress] = []
    /// Makes the real connection instead of a socket (handler tests hand over an `EmbeddedChannel`).
    var connectOverride: ((UpstreamTarget) -> EventLoopFuture<Channel>)? = nil

    /// A FIN this soon after a connection attempt began is taken as a client half-closing after
    /// its request (`printf … | nc -N`), not as a client leaving, however short the emulated
    /// set-up: a program writes and shuts down within microseconds, while one that gives up does
    /// so at a time-out of its own.
    static let halfCloseGrace = Span.milliseconds(250)

    /// `flow` is the client's flow on the link (nil when the link is pass-through). The attempt
    /// returned can be given up (``ConnectAttempt/abandon()``) while it is under way.
    @discardableResult
    func connect(
        to target: UpstreamTarget,
        flow: FlowID?,
        completion: @escaping (Result<Channel, UpstreamError>) -> Void
    ) -> ConnectAttempt {
        let loop = self.eventLoop
        // Every attempt goes into the event log with its outcome (the scenario checks count a
        // client's attempts during an outage from it: those never reach the server).
        // The first attempt of a client connection, for its first request: on a network the
        // client's own connect would have waited for it, from the moment that request left (its
        // first bytes, else its connect to netcond). Once netcond has answered the connection
        // itself (a captive portal's page, a fault's status), the client's connect was long over:
        // the time it spent with those answers is no hold of the link's.
        let connectedSince = self.client.flatMap { record in
            record.upstreamAttempted || record.answered ? nil : (record.firstBytesAt ?? record.acceptedAt)
        }
        self.client?.upstreamAttempted = true
        let rules = self.rules
        let attemptID = rules?.beginConnect(to: target.host, port: target.port, at: loop.now)
        let interception = self.interception(of: target)
        let deadlines = self.setUpDeadlines(target, flow: flow, connectedSince: connectedSince)
        let attempt = ConnectAttempt(
            target: target, refusal: interception.refusal, refusalIsReset: interception.refusalIsReset,
            unimpededBy: deadlines.unimpededBy, completion: self.reporting(completion, attemptID: attemptID))
        let startReal = { self.startReal(attempt, toPortal: interception.portal) }

        if let driver = self.driver, let flow {
            driver.connect(
                flow, host: target.host, port: target.port, resolvesName: target.isName,
                intercept: interception.verdict, handshakeUnderWay: startReal
            ) { outcome in
                if case .established = outcome, let attemptID, attempt.isUnderWay {
                    // Made, but later than an unimpeded set-up (its request or SYNs held in a
                    // blackhole, lost or queued, a held connect): the evidence notes it, since the
                    // client's connect, to netcond, could not time out meanwhile.
                    let held = Span(nanoseconds: (loop.now - deadlines.doneBy).nanoseconds)
                    rules?.noteHeldConnect(attemptID, held: held)
                }
                attempt.emulated(outcome)
            }
        } else if let intercept = interception.verdict {
            // No link model to time it (a pass-through run): refused or given up at once.
            attempt.emulated(intercept == .blackholed ? .timedOut(at: .zero) : .refusedByFirewall(at: .zero))
        } else {
            startReal()
            attempt.emulated(.established(at: .zero, synRetransmits: 0))
        }
        return attempt
    }

    /// What a closed captive portal does to an attempt (only tunnels, SOCKS5 and forwards get
    /// here while one is closed: it answers plain HTTP itself), and how its refusal is reported.
    private func interception(of target: UpstreamTarget) -> Interception {
        let firewall = "connection refused (netcond firewall: port \(target.port) is not allowed)"
        var interception = Interception(refusal: firewall)
        switch self.rules?.captiveIntercepts(host: target.host, port: target.port, now: self.eventLoop.now) {
        case .reset?:
            interception.verdict = .refused
            interception.refusal = "connection reset (netcond captive portal: log in at \(CaptivePortal.loginURL))"
            interception.refusalIsReset = true
        case .blackhole?:
            interception.verdict = .blackholed
        case .wrongCertificate?:
            // The portal answers in the target's place, with its own certificate. Without a TLS
            // library such a profile never starts, nor is switched to (tlsRefusal); should one get
            // here, the connection is reset as a portal's is, never let through to the real server.
            interception.portal = self.rules?.portalTLS
            if interception.portal == nil {
                interception.verdict = .refused
                interception.refusal =
                    "connection reset (netcond captive portal: no TLS library to present its certificate)"
                interception.refusalIsReset = true
            }
        case nil:
            break
        }
        return interception
    }

    /// When the set-up would be over with nothing lost (the DNS delay, a connect delay, one round
    /// trip: the one in force now), and at least `halfCloseGrace` from now; and when the client
    /// would have had its connection with nothing lost or held: from its own connect to netcond
    /// (its request crossing the link first), else from this attempt. Without a link model
    /// nothing is ever held, and a FIN is always a half-close.
    private func setUpDeadlines(
        _ target: UpstreamTarget, flow: FlowID?, connectedSince: NIODeadline?
    ) -> (unimpededBy: NIODeadline, doneBy: NIODeadline) {
        let now = self.eventLoop.now
        guard let driver = self.driver else { return (.distantFuture, now) }
        // The access link's and, for a destination on a route, the route's: its far end is no hold.
        let setUp = driver.model.unimpededSetUp(
            flow, host: target.host, port: target.port, resolvesName: target.isName)
        let unimpededBy = now + .nanoseconds(max(setUp, Self.halfCloseGrace).nanoseconds)
        let doneBy =
            connectedSince.map { $0 + .nanoseconds((driver.delay(.up) + setUp).nanoseconds) }
            ?? now + .nanoseconds(setUp.nanoseconds)
        return (unimpededBy, doneBy)
    }

    /// The caller's completion, after the event log has the attempt's outcome and, when the
    /// connection went to netcond's origin, its client knows that what goes down from here on is
    /// the origin's (see ClientConnectionRecord).
    private func reporting(
        _ completion: @escaping (Result<Channel, UpstreamError>) -> Void, attemptID: Int?
    ) -> (Result<Channel, UpstreamError>, _ routedToOrigin: Bool) -> Void {
        let rules = self.rules
        let client = self.client
        let loop = self.eventLoop
        return { result, routedToOrigin in
            if let attemptID { rules?.finishConnect(attemptID, result: result.map { _ in () }) }
            if case .success(let channel) = result, let client, routedToOrigin {
                client.originUpstream = (channel.localAddress?.port ?? 0, loop.now, client.downWritten)
            }
            completion(result)
        }
    }

    private static func bootstrap(_ loop: EventLoop) -> ClientBootstrap {
        ClientBootstrap(group: loop)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelOption(.autoRead, value: false)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(Self.connectTimeout)
    }

    /// The real connection: started only once the first emulated SYN that reaches the server has left, so a
    /// server never sees a connection the emulated network would not have delivered (one
    /// refused or blackholed by an outage, the firewall or the portal, held by `connect_hold`,
    /// or given up by its client meanwhile). No lookup, no packet leaves for a host the run
    /// pretends is unreachable. The real connect then has the emulated round trip to finish in.
    private func startReal(_ attempt: ConnectAttempt, toPortal: PortalTLSServer?) {
        guard attempt.isUnderWay else { return }
        let target = attempt.target
        let listeners = self.listeners
        let stats = self.stats
        let real = self.realConnection(to: target, toPortal: toPortal, attempt: attempt)
        real.hop(to: self.eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let channel):
                if let reached = ProcessListeners.listener(reachedBy: channel, among: listeners) {
                    ProcessListeners.noteLoop(channel, reached: reached)
                    channel.close(promise: nil)
                    return attempt.real(.failure(.loop(target)))
                }
                attempt.real(.success(channel))
            case .failure(let error) where LoopRefusingResolver.loop(in: error) != nil:
                attempt.real(.failure(.loop(target)))
            case .failure(let error):
                stats.upstreamFailures += 1
                attempt.real(.failure(Self.classify(error, target: target)))
            }
        }
    }

    /// Connects to the portal's stand-in, through the test's override, to netcond's origin (the
    /// attempt notes that it went there), or to the target itself.
    private func realConnection(
        to target: UpstreamTarget, toPortal: PortalTLSServer?, attempt: ConnectAttempt
    ) -> EventLoopFuture<Channel> {
        let loop = self.eventLoop
        if let toPortal {
            return toPortal.start().flatMap { address in Self.bootstrap(loop).connect(to: address) }
        }
        if let connectOverride = self.connectOverride { return connectOverride(target) }
        switch self.overrides.lookup(target.host) {
        case .some(.some(var address)):
            attempt.routedToOrigin = true
            if target.port == 443, OriginHost.isOwn(target.host) {
                // Served where there is a TLS library; else the port is closed.
                guard let tls = self.overrides.originTLS else {
                    return loop.makeFailedFuture(UpstreamError.refused(target, "connection refused"))
                }
                address = tls
            } else if target.port != 80 && target.port != 443 {
                address.port = target.port
            }
            return Self.bootstrap(loop).connect(to: address)
        case .some(.none):
            return loop.makeFailedFuture(UpstreamError.nameNotResolved(target.host))
        case .none:
            // A name or address that is one of netcond's own listeners is not connected to.
            return LoopRefusingResolver.connect(
                Self.bootstrap(loop), host: target.host, port: target.port, refusing: self.listeners, on: loop)
        }
    }

    static func classify(_ error: Error, target: UpstreamTarget) -> UpstreamError {
        if let error = error as? UpstreamError { return error }
        // A lookup that found no address at all: the name does not resolve; anything else is
        // a refusal, with the reason `reason` gives.
        if let error = error as? NIOConnectionError, error.connectionErrors.isEmpty {
            return .nameNotResolved(target.host)
        }
        return .refused(target, Self.reason(error))
    }

    static func reason(_ error: Error) -> String {
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return Self.reason(first.error) }
            return "the name does not resolve"
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case 111: return "connection refused"
            case 113, 101: return "no route to host"
            case 110: return "timed out"
            default: return "\(error)"
            }
        }
        if error is ChannelError { return "connect timed out" }
        return "\(error)"
    }
}

/// What a closed captive portal does to an upstream attempt.
private struct Interception {
    /// What a refusal is reported as (the firewall's, or the portal's reset).
    var refusal: String
    var refusalIsReset = false
    /// The portal's verdict, in place of the profile's (nil: the profile's rules decide).
    var verdict: SetupVerdict?
    /// The portal's TLS server answers in the target's place (`wrong-certificate`).
    var portal: PortalTLSServer?
}

/// One upstream connection being made: the emulated set-up, and the real socket from the moment
/// the first emulated SYN that reaches the server leaves; the caller hears once both are done, at the
/// emulated moment. The emulated outcome wins: a failed emulated handshake ends the attempt at
/// once and closes a real connection that did succeed.
final class ConnectAttempt {
    let target: UpstreamTarget
    /// What a refusal by a set-up rule is reported as (the firewall's or the portal's).
    let refusal: String
    let refusalIsReset: Bool
    /// When the emulated set-up would be done if nothing were lost or held: before then a real
    /// client could not have sent anything on the connection.
    let unimpededBy: NIODeadline
    /// The real connection went to netcond's origin (not the portal's stand-in): its completion hears so.
    var routedToOrigin = false
    private var completion: ((Result<Channel, UpstreamError>, _ routedToOrigin: Bool) -> Void)?
    private var emulatedOutcome: ConnectOutcome?
    private var realResult: Result<Channel, UpstreamError>?

    init(
        target: UpstreamTarget, refusal: String, refusalIsReset: Bool, unimpededBy: NIODeadline,
        completion: @escaping (Result<Channel, UpstreamError>, _ routedToOrigin: Bool) -> Void
    ) {
        self.target = target
        self.refusal = refusal
        self.refusalIsReset = refusalIsReset
        self.unimpededBy = unimpededBy
        self.completion = completion
    }

    /// True until the caller has heard the outcome.
    var isUnderWay: Bool { self.completion != nil }

    /// The client gave up: the caller hears `.abandoned` now, and whatever the real connection
    /// and the emulated set-up still produce is closed and ignored, so nothing the client sent
    /// ever reaches the server.
    func abandon() {
        guard let completion else { return }
        self.completion = nil
        if case .success(let channel) = self.realResult { channel.close(promise: nil) }
        completion(.failure(.abandoned(self.target)), self.routedToOrigin)
    }

    func emulated(_ outcome: ConnectOutcome) {
        self.emulatedOutcome = outcome
        self.finishIfDone()
    }

    func real(_ result: Result<Channel, UpstreamError>) {
        self.realResult = result
        if self.completion == nil, case .success(let channel) = result {
            channel.close(promise: nil)  // abandoned meanwhile
            return
        }
        self.finishIfDone()
    }

    /// An established emulated handshake waits for the real connection (begun when its SYN left);
    /// a failed one ends the attempt at once: the real connection was never begun, or (a cut while
    /// the handshake was under way) is closed as soon as it is there.
    private func finishIfDone() {
        guard let emulated = self.emulatedOutcome, let completion else { return }
        let failure: UpstreamError
        switch emulated {
        case .established:
            guard let real = self.realResult else { return }
            self.completion = nil
            return completion(real, self.routedToOrigin)
        case .refused:
            failure = .refused(self.target, "connection refused (netcond outage)")
        case .timedOut:
            failure = .timedOut(self.target)
        case .refusedByFirewall:
            failure = .refused(self.target, self.refusal, reset: self.refusalIsReset)
        case .nameNotResolved:
            failure = .nameNotResolved(self.target.host, "netcond dns_fail")
        }
        self.completion = nil
        if case .success(let channel) = self.realResult { channel.close(promise: nil) }
        completion(.failure(failure), self.routedToOrigin)
    }
}

/// Why a connection could not be made, in a few words (`connection refused`, `timed out`).
public func describeConnectError(_ error: Error) -> String {
    UpstreamConnector.reason(error)
}
