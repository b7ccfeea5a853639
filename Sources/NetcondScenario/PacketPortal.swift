import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NetcondCore
import NetcondPacket
import NetcondProxy

/// The captive portal of a run under the packet engine: what a hotel's network does, done to the
/// command's own packets.
///
/// ```
///  portal address P (127.110.X.Y)   :80    portal.netcond.test and the OS probes' hosts (named in
///                                          the command's /etc/hosts): the portal's site, probes
///                                   :8080  plain HTTP intercepted while closed (NAT, any host)
///                                   :8443  other TCP intercepted, with `https: wrong-certificate`
///  [::1]:ephemeral                         the same two for IPv6
/// ```
/// While the portal is closed, the cage's NAT chain sends new connections to port 80 to the portal
/// (the request gets the login page or a redirect, whatever its host), and the engine's gate stops
/// the rest (reset, blackhole, or the NAT sends them to the portal's certificate; UDP and pings
/// are lost; DNS passes). Logging in (`POST /login`), the timeline, `netcond ctl captive` and the
/// end of a `session` switch it, in the rules and the engine together. Every answer carries
/// `Connection: close`, so a request after the portal opens goes out on a connection of its own, to
/// its real server.
///
/// Its log is the scenario's portal evidence, as the proxy's event log is in proxy mode.
final class PacketPortal: @unchecked Sendable {
    /// The portal's IPv4 address.
    let address: String
    static let interceptPort = 8080
    static let certificatePort = 8443

    private let cage: PacketCage
    private let engine: PacketEngine
    /// The portal's clock zero (uptime nanoseconds): the engine's.
    private let startedAt: Int64
    private let state: NIOLockedValueBox<State>
    private let ports6: (http: Int?, tls: Int?)
    private let channels: [Channel]
    private let tlsServers: [NIOLoopBound<PortalTLSServer>]
    /// Rules and gate changes, one at a time, in order.
    private let gateQueue = DispatchQueue(label: "netcond packet portal")
    /// What the rules say now (gate queue only).
    private var applied: PacketCage.CaptiveRedirect?

    struct State {
        var portal: CaptivePortal
        var events: [(at: Int64, kind: PortalAction, detail: String)] = []
    }

    private init(
        address: String, cage: PacketCage, engine: PacketEngine, spec: CaptivePortalSpec?, channels: [Channel],
        tlsServers: [NIOLoopBound<PortalTLSServer>], ports6: (http: Int?, tls: Int?), state: NIOLockedValueBox<State>
    ) {
        self.address = address
        self.cage = cage
        self.engine = engine
        self.startedAt = engine.clockOrigin
        self.channels = channels
        self.tlsServers = tlsServers
        self.ports6 = ports6
        self.state = state
    }

    /// Binds the portal's servers on `address` (its port 80 already bound: `named`) and on `::1`,
    /// installs the NAT chain and closes the gate if the profile's portal starts closed.
    static func start(
        named: Channel, address: String, spec: CaptivePortalSpec?, engine: PacketEngine, loop: EventLoop,
        tls: any TLSProvider, bindHTTP: @escaping @Sendable (String, Int, _ intercepted: Bool) async throws -> Channel
    ) async throws -> PacketPortal {
        var channels = [named]
        var tlsServers: [NIOLoopBound<PortalTLSServer>] = []
        let state = NIOLockedValueBox(State(portal: CaptivePortal(spec: spec)))
        let onTLS: @Sendable () -> Void = {
            Self.record(state, .intercepted, "portal wrong-certificate: a TLS connection met the portal's certificate")
        }
        do {
            channels.append(try await bindHTTP(address, Self.interceptPort, true))
            var http6: Int?
            var tls6: Int?
            // IPv6 only where the machine has ::1 (the rules leave IPv6 alone otherwise).
            if let channel = try? await bindHTTP("::1", 0, true) {
                channels.append(channel)
                http6 = channel.localAddress?.port
            }
            for (host, port) in [(address, Self.certificatePort), ("::1", 0)] {
                // Made on its loop, where it lives.
                let server = try await loop.submit {
                    NIOLoopBound(
                        PortalTLSServer(eventLoop: loop, tls: tls, host: host, port: port, onConnection: onTLS),
                        eventLoop: loop)
                }.get()
                let bound = try? await loop.flatSubmit { server.value.start() }.get()
                if host == address && bound == nil {
                    throw TemporaryFiles.Failure(description: "cannot bind the portal's TLS server on \(host):\(port)")
                }
                if bound != nil { tlsServers.append(server) }
                if host == "::1" { tls6 = bound?.port }
            }
            let portal = PacketPortal(
                address: address, cage: engine.cage, engine: engine, spec: spec, channels: channels,
                tlsServers: tlsServers, ports6: (http6, tls6), state: state)
            try await portal.onGateQueue { () throws(PacketEngineError) in try portal.syncGate(force: true) }
            return portal
        } catch {
            for channel in channels { try? await channel.close() }
            for server in tlsServers { loop.execute { server.value.stop() } }
            throw error
        }
    }

    func stop() async {
        for channel in self.channels { try? await channel.close() }
        for server in self.tlsServers { server.eventLoop.execute { server.value.stop() } }
    }

    private var elapsed: Span { Span(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds) - self.startedAt) }

    private static func record(_ state: NIOLockedValueBox<State>, _ kind: PortalAction, _ detail: String) {
        let now = Int64(NIODeadline.now().uptimeNanoseconds)
        state.withLockedValue { $0.events.append((now, kind, detail)) }
    }

    // MARK: - Answers

    /// What a plain HTTP request to the portal gets. `intercepted`: it came by the NAT (its
    /// connection was made while the portal was closed), so a closed portal's answer even if the
    /// portal opened since.
    func answer(method: String, host: String, path: String, intercepted: Bool) -> CannedResponse {
        let now = self.elapsed
        let url = "http://\(host)\(path)"
        let (answer, opened) = self.state.withLockedValue { s -> (CannedResponse?, Bool) in
            let wasClosed = s.portal.isClosed(at: now)
            let answer =
                intercepted && !wasClosed && host != CaptivePortal.host
                ? s.portal.closedAnswer(host: host, path: path)
                : s.portal.answer(method: method, host: host, path: path, at: now)
            let stamp = Int64(NIODeadline.now().uptimeNanoseconds)
            if wasClosed && !s.portal.isClosed(at: now) {
                s.events.append((stamp, .opened, "portal opened: \(method) \(url)"))
                return (answer, true)
            }
            if let answer, (wasClosed || intercepted) && host != CaptivePortal.host {
                s.events.append((stamp, .answered, "portal answered \(answer.status): \(method) \(url)"))
            }
            return (answer, false)
        }
        if opened { self.gateQueue.async { try? self.syncGate() } }
        return answer
            ?? CannedResponse.text(404, "netcond portal: nothing at \(url) (this is the captive portal's address)\n")
    }

    // MARK: - State

    /// Opens or closes the portal (the timeline, the control API).
    func set(open: Bool) async {
        let now = self.elapsed
        self.state.withLockedValue { s in
            if open { s.portal.open(at: now) } else { s.portal.close() }
            s.events.append(
                (
                    Int64(NIODeadline.now().uptimeNanoseconds), open ? .opened : .closed,
                    open ? "portal opened (control)" : "portal closed (control)"
                ))
        }
        try? await self.onGateQueue { () throws(PacketEngineError) in try self.syncGate() }
    }

    /// A profile switch: the new profile's portal (or none) starts as its spec says.
    func replace(with spec: CaptivePortalSpec?) async {
        self.state.withLockedValue { $0.portal.replace(with: spec) }
        try? await self.onGateQueue { () throws(PacketEngineError) in try self.syncGate() }
    }

    /// "open" or "closed"; nil when the profile has no portal.
    var stateText: String? {
        let now = self.elapsed
        return self.state.withLockedValue { s in
            s.portal.spec == nil ? nil : s.portal.isClosed(at: now) ? "closed" : "open"
        }
    }

    /// The portal's log as scenario evidence (seconds from the client's start).
    func events(clientStart: Int64) -> [RunEvidence.PortalEvent] {
        self.state.withLockedValue { s in
            s.events.map {
                RunEvidence.PortalEvent(at: Double($0.at - clientStart) / 1e9, kind: $0.kind, detail: $0.detail)
            }
        }
    }

    private func onGateQueue(_ body: @escaping @Sendable () throws(PacketEngineError) -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            self.gateQueue.async {
                do {
                    try body()
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Brings the rules and the engine's gate in line with the portal's state (gate queue only).
    /// An open portal whose session ends comes back here when it does.
    private func syncGate(force: Bool = false) throws(PacketEngineError) {
        let now = self.elapsed
        let (closed, https, closesAt) = self.state.withLockedValue { s in
            (s.portal.isClosed(at: now), s.portal.spec?.https ?? .reset, s.portal.closesAt)
        }
        let redirect =
            closed
            ? PacketCage.CaptiveRedirect(
                address: self.address, http: Self.interceptPort, http6: self.ports6.http,
                tls: https == .wrongCertificate ? (Self.certificatePort, self.ports6.tls) : nil)
            : nil
        if force || redirect != self.applied {
            try self.cage.setCaptive(redirect)
            self.applied = redirect
        }
        self.engine.setCaptiveGate(closed ? self.gate(https) : nil)
        if !closed, let closesAt, closesAt > now {
            let wait = closesAt - now
            self.gateQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait.nanoseconds))) { try? self.syncGate() }
        }
    }

    private func gate(_ https: CaptiveHTTPSBehaviour) -> PacketCaptiveGate {
        var endpoints = [PacketCaptiveGate.Endpoint]()
        if let bytes = ipAddressBytes(self.address) { endpoints.append(.init(address: bytes, port: nil)) }
        let loopback6 = [UInt8](repeating: 0, count: 15) + [1]
        for port in [self.ports6.http, self.ports6.tls].compactMap({ $0 }) {
            endpoints.append(.init(address: loopback6, port: UInt16(port)))
        }
        let state = self.state
        return PacketCaptiveGate(https: https, portal: endpoints) { _, target in
            Self.record(state, .intercepted, "portal \(https.rawValue): \(target)")
        }
    }
}

/// The portal's HTTP side: each request gets the portal's answer, and the connection closes after it.
final class PacketPortalHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let portal: PacketPortal
    private let intercepted: Bool
    private var head: HTTPRequestHead?

    init(portal: PacketPortal, intercepted: Bool) {
        self.portal = portal
        self.intercepted = intercepted
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let host = Self.host(head.headers.first(name: "Host") ?? "")
            let answer = self.portal.answer(
                method: head.method.rawValue, host: host.isEmpty ? self.portal.address : host, path: head.uri,
                intercepted: self.intercepted)
            answer.write(to: context, keepAlive: false)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    /// The Host header's name, lower-cased, without its port.
    static func host(_ header: String) -> String {
        var host = Substring(header.lowercased())
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            host = host[...end]
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        return String(host)
    }
}
