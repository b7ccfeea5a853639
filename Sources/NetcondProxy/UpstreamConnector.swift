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
        case .nameNotResolved(let host, let why): return "cannot resolve host '\(host)'" + (why.map { " (\($0))" } ?? "")
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
    /// Where port 443 of `origin.netcond.test` goes: the origin's HTTPS listener (nil: not served).
    var originTLS: SocketAddress?

    func lookup(_ host: String) -> SocketAddress?? {
        let name = host.lowercased().trimmingSuffix(".")
        if let address = self.exact[name] { return .some(address) }
        if name == "netcond.test" || name.hasSuffix(".netcond.test") { return .some(self.netcondTest) }
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
/// The real connection (loopback or otherwise) starts when the emulated SYN that gets through
/// leaves, never for an attempt the emulated network refuses, blackholes or holds; the caller is
/// answered only when both it and the emulated set-up (`LinkModel.connect`: DNS delay, SYN round
/// trip, SYN losses) are done, so a refusal is reported one emulated round trip after the SYN, as
/// on a real link.
struct UpstreamConnector {
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
        // The first attempt of a client connection: on a network the client's own connect would
        // have waited for it, from the moment the client connected to netcond.
        let connectedSince = self.client.flatMap { $0.upstreamAttempted ? nil : $0.acceptedAt }
        self.client?.upstreamAttempted = true
        let rules = self.rules
        let attemptID = rules?.beginConnect(to: target.host, port: target.port, at: loop.now)
        let client = self.client
        // Set below when the connection really goes to netcond's origin (not the portal's stand-in).
        var routedToOrigin = false
        let completion: (Result<Channel, UpstreamError>) -> Void = { result in
            if let attemptID { rules?.finishConnect(attemptID, result: result.map { _ in () }) }
            if case .success(let channel) = result, let client, routedToOrigin {
                // From here on, what goes down to the client is the origin's (see ClientConnectionRecord).
                client.originUpstream = (channel.localAddress?.port ?? 0, loop.now, client.downWritten)
            }
            completion(result)
        }
        var refusal = "connection refused (netcond firewall: port \(target.port) is not allowed)"
        var refusalIsReset = false
        var intercept: SetupVerdict?
        // Only tunnels, SOCKS5 and forwards get here while a portal is closed (plain HTTP is
        // answered by the portal itself).
        var toPortal: PortalTLSServer?
        switch self.rules?.captiveIntercepts(host: target.host, port: target.port, now: loop.now) {
        case .reset?:
            intercept = .refused
            refusal = "connection reset (netcond captive portal: log in at \(CaptivePortal.loginURL))"
            refusalIsReset = true
        case .blackhole?:
            intercept = .blackholed
        case .wrongCertificate?:
            // The portal answers in the target's place, with its own certificate. Without a TLS
            // library such a profile never starts, nor is switched to (tlsRefusal); should one get
            // here, the connection is reset as a portal's is, never let through to the real server.
            toPortal = self.rules?.portalTLS
            if toPortal == nil {
                intercept = .refused
                refusal = "connection reset (netcond captive portal: no TLS library to present its certificate)"
                refusalIsReset = true
            }
        case nil:
            break
        }
        // When the set-up would be over with nothing lost (the DNS delay, a connect delay, one
        // round trip), and at least `halfCloseGrace` from now. Without a link model nothing is
        // ever held, and a FIN is always a half-close.
        var unimpededBy = NIODeadline.distantFuture
        // When the client would have had its connection with nothing lost or held: from its own
        // connect to netcond (its request crossing the link first), else from this attempt.
        var setUpDoneBy = loop.now
        if let conditions = self.driver?.model.conditions {
            let setUp = (target.isName ? conditions.dnsDelay : .zero) + conditions.connectDelay + conditions.baseRTT
            unimpededBy = loop.now + .nanoseconds(max(setUp, Self.halfCloseGrace).nanoseconds)
            setUpDoneBy = connectedSince.map { $0 + .nanoseconds((conditions.up.latency + setUp).nanoseconds) }
                ?? loop.now + .nanoseconds(setUp.nanoseconds)
        }
        let attempt = ConnectAttempt(
            target: target, refusal: refusal, refusalIsReset: refusalIsReset, unimpededBy: unimpededBy, completion: completion)

        @Sendable func bootstrap() -> ClientBootstrap {
            ClientBootstrap(group: loop)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelOption(.autoRead, value: false)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .connectTimeout(.seconds(30))
        }
        let stats = self.stats
        let overrides = self.overrides
        let connectOverride = self.connectOverride
        let listeners = self.listeners
        // The real connection: started only once the emulated SYN that gets through has left, so a
        // server never sees a connection the emulated network would not have delivered (one
        // refused or blackholed by an outage, the firewall or the portal, held by `connect_hold`,
        // or given up by its client meanwhile). No lookup, no packet leaves for a host the run
        // pretends is unreachable. The real connect then has the emulated round trip to finish in.
        func startReal() {
            guard attempt.isUnderWay else { return }
            let real: EventLoopFuture<Channel>
            if let toPortal {
                real = toPortal.start().flatMap { address in bootstrap().connect(to: address) }
            } else if let connectOverride {
                real = connectOverride(target)
            } else {
                switch overrides.lookup(target.host) {
                case .some(.some(let address)):
                    routedToOrigin = true
                    var address = address
                    if target.port == 443, target.host.lowercased().trimmingSuffix(".") == OriginHost.name {
                        // Served where there is a TLS library; else the port is closed.
                        guard let tls = overrides.originTLS else {
                            real = loop.makeFailedFuture(UpstreamError.refused(target, "connection refused"))
                            break
                        }
                        address = tls
                    } else if target.port != 80 && target.port != 443 {
                        address.port = target.port
                    }
                    real = bootstrap().connect(to: address)
                case .some(.none):
                    real = loop.makeFailedFuture(UpstreamError.nameNotResolved(target.host))
                case .none:
                    // A name or address that is one of netcond's own listeners is not connected to.
                    real = bootstrap().resolver(LoopRefusingResolver(loop: loop, listeners: listeners))
                        .connect(host: target.host, port: target.port)
                }
            }
            real.hop(to: loop).assumeIsolated().whenComplete { result in
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

        if let driver = self.driver, let flow {
            driver.connect(
                flow, host: target.host, port: target.port, resolvesName: target.isName, intercept: intercept,
                handshakeUnderWay: startReal
            ) { outcome in
                if case .established = outcome, let attemptID, attempt.isUnderWay {
                    // Made, but later than an unimpeded set-up (its request or SYNs held in a
                    // blackhole or lost, a held connect): the evidence notes it, since the
                    // client's connect, to netcond, could not time out meanwhile.
                    rules?.noteHeldConnect(attemptID, held: Span(nanoseconds: (loop.now - setUpDoneBy).nanoseconds))
                }
                attempt.emulated(outcome)
            }
        } else if let intercept {
            // No link model to time it (a pass-through run): refused or given up at once.
            attempt.emulated(intercept == .blackholed ? .timedOut(at: .zero) : .refusedByFirewall(at: .zero))
        } else {
            startReal()
            attempt.emulated(.established(at: .zero, synRetransmits: 0))
        }
        return attempt
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

/// One upstream connection being made: the emulated set-up, and the real socket from the moment
/// the emulated SYN that gets through leaves; the caller hears once both are done, at the
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
    private var completion: ((Result<Channel, UpstreamError>) -> Void)?
    private var emulatedOutcome: ConnectOutcome?
    private var realResult: Result<Channel, UpstreamError>?

    init(
        target: UpstreamTarget, refusal: String, refusalIsReset: Bool, unimpededBy: NIODeadline,
        completion: @escaping (Result<Channel, UpstreamError>) -> Void
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
        completion(.failure(.abandoned(self.target)))
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
            return completion(real)
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
        completion(.failure(failure))
    }
}

/// Why a connection could not be made, in a few words (`connection refused`, `timed out`).
public func describeConnectError(_ error: Error) -> String {
    UpstreamConnector.reason(error)
}
