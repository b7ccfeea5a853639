import CNetcondSystem
import NIOCore
import NIOPosix
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// The stream engine: an HTTP / CONNECT / SOCKS5 proxy and port forwards, all on one event loop,
/// all crossing one emulated access link (`LinkModel`).
public final class ProxyServer: Sendable {
    public let configuration: ProxyConfiguration
    private let loop: EventLoop
    let state: NIOLoopBoundBox<State>

    /// The loop every proxied connection and the link model live on.
    public var eventLoop: EventLoop { self.loop }

    final class State {
        var driver: LinkDriver?
        var profile: Profile
        var onStateChange: (@Sendable (LinkState, Span) -> Void)?
        let stats = ProxyStats()
        let rules: ProxyRules

        init(profile: Profile, seed: UInt64, startedAt: NIODeadline, eventLoop: EventLoop, tls: (any TLSProvider)?) {
            self.profile = profile
            self.rules = ProxyRules(profile: profile, seed: seed, startedAt: startedAt, eventLoop: eventLoop, tls: tls)
        }

        var listeners: [Channel] = []
        var children: [ObjectIdentifier: Channel] = [:]
        /// Connections a splice relay has (see ProxyServer+Splice), by id; none once stopping.
        var relays: [Int: SplicedConnection] = [:]
        /// The last relay id given (one per relay the proxy tried to start; those started are
        /// `stats.splicedConnections`).
        var nextRelay = 0
        /// Connections a relay handed back that are not yet NIO channels in `children` (open all the same).
        var adopting = 0
        var stopping = false
        /// This server's listeners (in ``ProcessListeners`` while it runs).
        var selfAddresses: [SocketAddress] = []
    }

    /// The listeners a client at `peer` may not reach through the proxy: netcond's own (a loop),
    /// and for a client from another host also those kept for this host's clients.
    static func listenersRefused(to peer: SocketAddress?, own: [SocketAddress], localOnly: [SocketAddress])
        -> [SocketAddress]
    {
        HostAddress.isLoopback(peer?.ipAddress ?? "") ? own : own + localOnly
    }

    public init(configuration: ProxyConfiguration, group: EventLoopGroup) {
        self.configuration = configuration
        self.loop = group.next()
        self.state = NIOLoopBoundBox.makeBoxSendingValue(
            State(
                profile: configuration.profile, seed: configuration.seed, startedAt: .now(), eventLoop: self.loop,
                tls: configuration.tls),
            eventLoop: self.loop
        )
    }

    /// Called on the proxy's loop whenever the link's state changes (schedule phase, outage,
    /// stall), with the time since the start. Set before `start()` to see the initial state.
    public func observeStateChanges(_ handler: @escaping @Sendable (LinkState, Span) -> Void) async {
        let state = self.state
        try? await self.loop.submit {
            state.value.onStateChange = handler
        }.get()
    }

    /// Binds the proxy port and every forward. Throws a user-facing error when a port is taken.
    public func start() async throws -> ProxyAddresses {
        if let refusal = self.configuration.profile.proxyRefusal(hasTLS: self.configuration.tls != nil) {
            throw ProxyStartError(description: refusal)
        }
        // Every proxied connection costs two descriptors; use all the process may have.
        _ = netcond_raise_open_file_limit()
        // The link exists from the start, so a schedule's clock starts with the run.
        let configuration = self.configuration
        let state = self.state
        let loop = self.loop
        try await loop.submit {
            let s = state.value
            s.rules.startedAt = loop.now
            if !configuration.profile.isPassThrough || configuration.controllable {
                // One start for the link's clock and the rules' (fault windows, events, portal sessions).
                let driver = LinkDriver(
                    profile: configuration.profile, seed: configuration.seed, eventLoop: loop, epoch: s.rules.startedAt)
                driver.spinWindow = configuration.timerSpin
                driver.onStateChange = { linkState, at in
                    let elapsed = Span(nanoseconds: at.nanoseconds)
                    s.rules.record(ProxyEvent(at: elapsed.seconds, kind: .link, detail: "link: \(linkState)"))
                    s.onStateChange?(linkState, elapsed)
                }
                s.driver = driver
                driver.pump()
            }
        }.get()
        var proxy: SocketAddress?
        if self.configuration.servesProxy {
            proxy = try await self.bind(host: self.configuration.listenHost, port: self.configuration.listenPort) {
                channel, state, connector in
                let shaper = LinkShaper(driver: state.driver, stats: state.stats, record: connector.client)
                let sniffer = ProtocolSniffer(shaper: shaper, connector: connector)
                try channel.pipeline.syncOperations.addHandlers([shaper, sniffer])
            }
        }
        var forwardAddresses: [SocketAddress] = []
        for forward in self.configuration.forwards {
            forwardAddresses.append(try await self.bindForward(forward))
        }
        return ProxyAddresses(proxy: proxy, forwards: forwardAddresses)
    }

    /// Adds a forward to a running proxy (its link is the proxy's); returns where it listens.
    public func addForward(_ forward: PortForward) async throws -> SocketAddress {
        try await self.bindForward(forward)
    }

    /// Listens for `forward`: each connection it accepts goes through the link to its target, or
    /// through a splice relay while nothing needs to see its bytes (ProxyServer+Splice).
    private func bindForward(_ forward: PortForward) async throws -> SocketAddress {
        let hook = self.configuration.forwardConnectionHook
        let closes = self.configuration.forwardClosesOnUpstreamFailure
        let target = UpstreamTarget(host: forward.targetHost, port: forward.targetPort)
        let setUp: ClientSetUp = { channel, state, connector in
            let shaper = LinkShaper(driver: state.driver, stats: state.stats, record: connector.client)
            let (clientGlue, upstreamGlue) = GlueHandler.matchedPair()
            let attempt = NIOLoopBoundBox<ConnectAttempt?>(nil, eventLoop: channel.eventLoop)
            let hold = ForwardHold { now in
                guard let pending = attempt.value, pending.isUnderWay, now >= pending.unimpededBy else { return false }
                pending.abandon()
                return true
            }
            try channel.pipeline.syncOperations.addHandlers([shaper, hold, clientGlue])
            try hook?(channel, forward)
            let flow = shaper.beginShaping()
            attempt.value = connector.connect(to: target, flow: flow) { result in
                switch result {
                case .failure(.abandoned):
                    break  // the client is gone
                case .failure where closes:
                    channel.close(promise: nil)
                case .failure:
                    // Nothing to say in a raw TCP stream: reset it at once, like a refused connection.
                    channel.resetConnection()
                case .success(let upstream):
                    guard channel.isActive else {
                        upstream.close(promise: nil)
                        return
                    }
                    do {
                        try upstream.pipeline.syncOperations.addHandler(upstreamGlue)
                        upstream.setOption(.autoRead, value: true).whenFailure { _ in upstream.close(promise: nil) }
                        if let context = try? channel.pipeline.syncOperations.context(handler: hold) {
                            hold.release(context: context)
                        }
                        channel.read()
                    } catch {
                        upstream.close(promise: nil)
                        channel.close(promise: nil)
                    }
                }
            }
        }
        return try await self.bind(
            host: forward.listenHost, port: forward.listenPort,
            takingOver: { channel in self.spliceIfAllowedOnLoop(channel, forward: forward, setUp: setUp) },
            configure: setUp)
    }

    private func bind(
        host: String,
        port: Int,
        takingOver takeOver: (@Sendable (Channel) -> Bool)? = nil,
        configure: @escaping ClientSetUp
    ) async throws -> SocketAddress {
        let loop = self.loop
        let state = self.state
        let listener = ServerBootstrap.proxyListener(on: loop)
        let setUp: @Sendable (Channel) throws -> Void = { channel in
            try self.setUpClientOnLoop(channel, record: nil, setUp: configure)
        }
        let bootstrap =
            takeOver.map { listener.childChannelSetUp(takingOver: $0, setUp) } ?? listener.childChannelSetUp(setUp)
        let channel: Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            throw ProxyStartError(
                description: "cannot listen on \(host):\(port): \(Self.reason(error))",
                addressInUse: (error as? IOError)?.errnoCode == EADDRINUSE)
        }
        guard let address = channel.localAddress else {
            throw ProxyStartError(description: "cannot listen on \(host):\(port): no local address")
        }
        try await loop.submit {
            state.value.listeners.append(channel)
            state.value.selfAddresses.append(address)
        }.get()
        ProcessListeners.add(address, .proxy)
        return address
    }

    static func reason(_ error: Error) -> String {
        if let error = error as? IOError {
            switch error.errnoCode {
            case 98: return "the address is already in use"
            case 99: return "the address is not available on this machine"
            case 13: return "permission denied (ports below 1024 need root)"
            default: return "\(error)"
            }
        }
        return "\(error)"
    }

    /// Closes every listener and connection.
    public func stop() async {
        let state = self.state
        let loop = self.loop
        let closing: EventLoopFuture<Void> = self.loop.flatSubmit {
            // Spliced connections close with the rest (their relays' threads end first).
            state.value.stopping = true
            self.reclaimAllRelaysOnLoop(adopt: false)
            let all = state.value.listeners + Array(state.value.children.values)
            state.value.listeners = []
            for address in state.value.selfAddresses { ProcessListeners.remove(address) }
            state.value.selfAddresses = []
            state.value.rules.portalTLS?.stop()
            let futures = all.map { channel in channel.close().recover { _ in } }
            return EventLoopFuture.andAllComplete(futures, on: loop)
        }
        _ = try? await closing.get()
    }

    // MARK: - Live control

    /// The link's state and the run's counters; call on `eventLoop`.
    func statusOnLoop() -> ControlStatus {
        let s = self.state.value
        let linkState = s.driver?.model.state ?? LinkState(phase: s.profile.name)
        let counters = s.driver?.model.counters ?? LinkCounters()
        return ControlStatus(
            profile: s.profile.name,
            phase: linkState.phase,
            outage: linkState.outage?.rawValue,
            stalled: linkState.stalled.map(\.rawValue),
            seed: self.configuration.seed,
            elapsedSeconds: s.rules.elapsed(at: self.loop.now).seconds,
            connectionsTotal: s.stats.connections,
            connectionsOpen: s.children.count + s.relays.count + s.adopting,
            bytesUp: s.stats.upTotal,
            bytesDown: s.stats.downTotal,
            bytesDelivered: s.stats.deliveredTotal,
            segmentsSent: counters.segmentsSent, segmentsLost: counters.segmentsLost,
            queueDrops: counters.queueDrops,
            outageDrops: counters.outageDrops,
            retransmissions: counters.retransmissions,
            resets: counters.resets,
            closes: counters.closes,
            refusedConnections: counters.refusedConnections,
            upstreamFailures: s.stats.upstreamFailures,
            faults: s.rules.plan.rules.count,
            faultsApplied: s.rules.plan.rules.reduce(0) { $0 + $1.applied },
            captivePortal: s.rules.portalState(now: self.loop.now),
            timerWakeups: s.driver?.timerLateness.count ?? 0,
            timerLateUs: s.driver.map { driver in
                [
                    driver.timerLateness.percentile(50), driver.timerLateness.percentile(99),
                    driver.timerLateness.maximum,
                ]
                .map { Double($0.nanoseconds) / 1000 }
            } ?? [],
            engine: "proxy",
            queueDelayMs: s.driver.map { driver in
                [Direction.up, .down].map { Double(driver.model.queueingDelay($0).nanoseconds) / 1e6 }
            },
            link: [Direction.down, .up].map { ControlLinkNow($0, self.linkMomentOnLoop($0)) },
            // Delivered, and what arrived but waits behind a hole: at the link's rate while it is busy.
            linkBytesDown: s.stats.deliveredTotal + max(0, counters.bytesArrivedDown - counters.bytesDown),
            routes: s.driver.flatMap { $0.model.routes.isEmpty ? nil : $0.model.routes.count },
            directions: [Direction.down, .up].map { ControlDirectionCounters($0, counters[$0]) },
            splicedOpen: s.relays.count,
            splicedTotal: s.stats.splicedConnections
        )
    }

    /// One direction's rate, delay and loss in force now; call on `eventLoop`. Without a link model
    /// (a pass-through run) the profile's own.
    func linkMomentOnLoop(_ direction: Direction) -> LinkMoment {
        let s = self.state.value
        let now = Instant(nanoseconds: s.rules.elapsed(at: self.loop.now).nanoseconds)
        return s.driver?.model.moment(direction, at: now) ?? s.profile.direction(direction).moment(at: now)
    }

    /// One direction's rate, delay and loss in force now (a scenario's report samples it).
    public func linkMoment(_ direction: Direction) async -> LinkMoment? {
        try? await self.loop.submit { self.linkMomentOnLoop(direction) }.get()
    }

    /// Each route in force as it stands now (a scenario's report samples them); empty without routes.
    public func routeStatuses() async -> [ControlRoute] {
        (try? await self.loop.submit { self.state.value.driver?.routeStatuses() ?? [] }.get()) ?? []
    }

    /// The answer to a control request (status code and JSON); call on `eventLoop`. Every change
    /// goes through `applyOnLoop`; fault commands answer with the fault list, the others with the
    /// status.
    func controlAnswerOnLoop(_ route: ControlAPI.Route) -> (status: Int, json: [UInt8]) {
        let rules = self.state.value.rules
        switch route {
        case .status, .dashboard, .history:  // the dashboard page and the history are the control server's own
            return (200, self.statusOnLoop().json())
        case .faults:
            return (200, self.faultsOnLoop(added: nil).controlJSON())
        case .events:
            return (200, ControlEvents(events: rules.events, dropped: rules.eventsDropped).controlJSON())
        case .routes:
            return (200, ControlRoutes(routes: self.state.value.driver?.routeStatuses() ?? []).controlJSON())
        case .command(let command):
            if let rejection = self.rejectionOnLoop(command) {
                return (rejection.status, ControlError(error: rejection.message).controlJSON())
            }
            let status = self.applyOnLoop(command)
            switch command {
            case .addFault: return (200, self.faultsOnLoop(added: rules.plan.rules.last?.id).controlJSON())
            case .removeFault, .removeFaultsNamed: return (200, self.faultsOnLoop(added: nil).controlJSON())
            default: return (200, status.json())
            }
        }
    }

    /// Why a well-formed command cannot apply to this run (nothing is changed then).
    private func rejectionOnLoop(_ command: ControlCommand) -> ControlAPI.Rejection? {
        let s = self.state.value
        switch command {
        case .route(let name, _) where s.driver?.model.routeIndex(named: name) == nil:
            return ControlAPI.unknownRoute(name, among: s.profile.routes.map(\.name))
        case .removeFault(let id?) where !s.rules.plan.rules.contains(where: { $0.id == id }):
            let ids = s.rules.plan.rules.map { String($0.id) }.joined(separator: ", ")
            return ControlAPI.Rejection(
                status: 404, message: "no fault \(id); faults in force: \(ids.isEmpty ? "none" : ids)")
        case .removeFaultsNamed(let name) where !s.rules.plan.rules.contains(where: { $0.fault.name == name }):
            let names = Set(s.rules.plan.rules.compactMap(\.fault.name)).sorted().joined(separator: ", ")
            return ControlAPI.Rejection(
                status: 404, message: "no fault named '\(name)'; names in force: \(names.isEmpty ? "none" : names)")
        case .switchProfile(let profile):
            return profile.proxyRefusal(hasTLS: self.configuration.tls != nil).map {
                ControlAPI.Rejection(status: 400, message: $0)
            }
        case .handover where s.driver == nil:
            return ControlAPI.Rejection(
                status: 400,
                message:
                    "this run has no emulated link (a pass-through profile without live control): there are no connections to strand"
            )
        case .handover(let profile, _):
            return profile.proxyRefusal(hasTLS: self.configuration.tls != nil).map {
                ControlAPI.Rejection(status: 400, message: $0)
            }
        case .captive where s.rules.captive.spec == nil:
            return ControlAPI.Rejection(
                status: 400,
                message:
                    "the profile '\(s.profile.name)' has no captive portal; switch to one that does (e.g. captive-hotel) or add captive_portal: to yours"
            )
        case .cut where s.driver == nil:
            return ControlAPI.Rejection(
                status: 400,
                message:
                    "this run has no emulated link (a pass-through profile without live control): there is nothing to cut"
            )
        default:
            return nil
        }
    }

    private func faultsOnLoop(added: Int?) -> ControlFaults {
        let rules = self.state.value.rules.plan.rules
        return ControlFaults(
            faults: rules.map {
                ControlFault(
                    id: $0.id, label: $0.fault.label, fault: $0.fault.yamlDescription, matched: $0.matched,
                    applied: $0.applied)
            },
            added: added
        )
    }

    /// Applies a change to the running link; call on `eventLoop`. Returns the status after it.
    func applyOnLoop(_ command: ControlCommand) -> ControlStatus {
        // Spliced connections come back under the link first: the change applies to them too.
        self.reclaimAllRelaysOnLoop(adopt: true)
        let s = self.state.value
        switch command {
        case .switchProfile(let profile):
            s.profile = profile
            s.driver?.switchProfile(to: profile)
            s.rules.switchProfile(to: profile)
        case .outage(let outage):
            s.driver?.setOutage(outage)
        case .stall(let stall):
            s.driver?.setStall(stall)
        case .addFault(let fault):
            _ = s.rules.add(fault)
        case .removeFault(let id):
            if let id { _ = s.rules.remove(id: id) } else { s.rules.removeAll() }
        case .removeFaultsNamed(let name):
            s.rules.remove(named: name)
        case .captive(let open):
            s.rules.setPortal(open: open, now: self.loop.now)
        case .route(let name, let change):
            s.driver?.changeRoute(named: name, change)
            s.rules.record(
                ProxyEvent(
                    at: s.rules.elapsed(at: self.loop.now).seconds, kind: .link, detail: "route \(name): \(change)"))
        case .handover(let profile, let gap):
            s.profile = profile
            let count = s.driver?.handover(to: profile, gap: gap) ?? 0
            s.rules.switchProfile(to: profile)
            s.rules.record(
                ProxyEvent(
                    at: s.rules.elapsed(at: self.loop.now).seconds, kind: .link,
                    detail:
                        "link: handover to \(profile.name), outage (blackhole) for \(gap): \(count) connection\(count == 1 ? "" : "s") stranded"
                ))
        case .cut(let mode):
            let count = s.driver?.cutConnections(mode) ?? 0
            s.rules.record(
                ProxyEvent(
                    at: s.rules.elapsed(at: self.loop.now).seconds, kind: .link,
                    detail: "link: cut \(count) connection\(count == 1 ? "" : "s") (\(mode))"))
        }
        return self.statusOnLoop()
    }

    /// The link's state and counters now.
    public func status() async -> ControlStatus? {
        try? await self.loop.submit { self.statusOnLoop() }.get()
    }

    /// Changes the running link (as the control API does). Without a link model (a pass-through
    /// profile in a run that is not `controllable`) only the profile name changes.
    @discardableResult
    public func apply(_ command: ControlCommand) async -> ControlStatus? {
        try? await self.loop.submit { self.applyOnLoop(command) }.get()
    }

    /// The event log so far (attempts under way included, as `unanswered`), and the moment its times count from.
    public func eventLog() async -> (startedAt: NIODeadline, events: [ProxyEvent]) {
        let state = self.state
        let log = try? await self.loop.submit { () -> (NIODeadline, [ProxyEvent]) in
            (state.value.rules.startedAt, state.value.rules.eventsWithPending)
        }.get()
        return log ?? (.now(), [])
    }

    /// The device's radio as the access link's units drove it, and the moment its times count
    /// from (nil: the profile has no `radio:`, or the run has no link model).
    public func radio() async -> (model: RadioModel, startedAt: NIODeadline)? {
        let state = self.state
        return try? await self.loop.submit { state.value.driver?.model.radio.map { ($0, state.value.rules.startedAt) } }
            .get()
    }

    /// Counters so far.
    public func summary() async -> ProxySummary {
        let state = self.state
        let summary = try? await self.loop.submit { () -> ProxySummary in
            let s = state.value
            return ProxySummary(
                connections: s.stats.connections,
                bytesUp: s.stats.upTotal,
                bytesDown: s.stats.downTotal,
                upstreamFailures: s.stats.upstreamFailures,
                badRequests: s.stats.badRequests,
                link: s.driver?.model.counters ?? LinkCounters(),
                timerLateness: s.driver?.timerLateness ?? LatenessHistogram()
            )
        }.get()
        return summary
            ?? ProxySummary(
                connections: 0, bytesUp: 0, bytesDown: 0, upstreamFailures: 0, badRequests: 0, link: LinkCounters())
    }
}
