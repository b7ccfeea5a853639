import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NetcondCore
import NetcondOrigin
import NetcondPacket
import NetcondProxy

#if canImport(Glibc)
import Glibc
#endif

/// One run under the packet engine: the engine (cgroup, rules, link), the built-in origin,
/// reachable from the command as `origin.netcond.test` on ports 80 and 443, and the captive portal
/// (``PacketPortal``) at `portal.netcond.test`, where the OS connectivity probes' hosts also lead.
///
/// The origin listens on an address of its own in 127.0.0.0/8 (127.110.X.Y, from netcond's process
/// id), so runs side by side do not collide on ports 80 and 443; the command sees the name in an
/// /etc/hosts of its own (a mount namespace: nothing changes for the rest of the machine). Every
/// other name under `netcond.test` it resolves through the run's DNS responder (``PacketNaming``,
/// first in a resolv.conf of its own), which gives each an address of its own where the origin
/// listens too. Its packets to the origin, and its DNS queries, cross the link like any others.
public final class PacketSession: Sendable {
    public let profile: Profile
    public let seed: UInt64
    public let engine: PacketEngine
    public let origin: OriginServer
    public let originAddress: SocketAddress
    public let trust: OriginTrust
    /// The /etc/hosts the command sees (the machine's, and the origin's name).
    public let hostsFile: String
    /// The names under `netcond.test` beyond the hosts file, their responder and resolv.conf.
    let naming: PacketNaming
    /// The user the command runs as (`--user`); nil: netcond's own.
    public let identity: ChildIdentity?
    /// Which TCP sender the run's servers used (the origin's, as the kernel reports it).
    public let sender: SenderReport
    let portal: PacketPortal
    private let originGroup: MultiThreadedEventLoopGroup
    /// The control API (`netcond ctl`), and its URL for the command (`NETCOND_CONTROL`).
    private let control = NIOLockedValueBox<(server: ControlServer, url: String)?>(nil)
    /// The link's state changes, with their time since the engine started (the report's link lane).
    let stateChanges: NIOLockedValueBox<[(state: LinkState, at: Span)]>
    /// Watches a command run as root for leaving the cage (from its first spawn; nil under --user).
    private let watch = NIOLockedValueBox<CageWatch?>(nil)

    /// The command runs as root with nothing holding it in: it could leave its cgroup or change the
    /// firewall, and its packets would then bypass the link (`--user` prevents it).
    public var commandIsUncaged: Bool { self.identity == nil && geteuid() == 0 }

    private init(
        profile: Profile, seed: UInt64, engine: PacketEngine, origin: OriginServer, originAddress: SocketAddress,
        trust: OriginTrust, hostsFile: String, naming: PacketNaming, portal: PacketPortal,
        originGroup: MultiThreadedEventLoopGroup,
        stateChanges: NIOLockedValueBox<[(state: LinkState, at: Span)]>, identity: ChildIdentity?, sender: SenderReport
    ) {
        self.sender = sender
        self.identity = identity
        self.stateChanges = stateChanges
        self.portal = portal
        self.profile = profile
        self.seed = seed
        self.engine = engine
        self.origin = origin
        self.originAddress = originAddress
        self.trust = trust
        self.hostsFile = hostsFile
        self.naming = naming
        self.originGroup = originGroup
    }

    /// Why a packet session could not start.
    public enum Failure: Error, CustomStringConvertible {
        case engine(PacketEngineError)
        case origin(String)
        case control(String)

        public var description: String {
            switch self {
            case .engine(let error): return error.description
            case .origin(let why): return "cannot start the built-in origin for the packet engine: \(why)"
            case .control(let why): return "cannot start the control API: \(why)"
            }
        }
    }

    /// Starts the engine (checking the privilege first, before anything else runs) and the origin
    /// (HTTPS with `tls`, as the portal's wrong certificate).
    public static func start(
        profile: Profile,
        seed: UInt64,
        originContent: OriginContent = OriginContent(),
        capture: (delivered: String?, dropped: String?) = (nil, nil),
        precise: Bool = false,
        control: (host: String, port: Int)? = ("127.0.0.1", 0),
        guarding: ControlGuard? = nil,
        identity: ChildIdentity? = nil,
        tls: any TLSProvider,
        onStateChange: (@Sendable (LinkState, Span) -> Void)? = nil
    ) async throws(Failure) -> PacketSession {
        TemporaryFiles.removeStale()
        let stateChanges = NIOLockedValueBox<[(state: LinkState, at: Span)]>([])
        let observe: @Sendable (LinkState, Span) -> Void = { state, at in
            stateChanges.withLockedValue { if $0.count < 10_000 { $0.append((state, at)) } }
            onStateChange?(state, at)
        }
        let engine = try Self.startEngine(
            profile: profile, seed: seed, capture: capture, precise: precise, onStateChange: observe)
        let originGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // The origin sends with the profile's congestion control: the sender the stream engine models.
        let origin = OriginServer(
            configuration: OriginConfiguration(
                content: originContent, faultSeed: seed, congestionControl: profile.tcp.rawValue,
                routes: profile.routes))
        var trust: OriginTrust?
        var hostsFile: String?
        var naming: PacketNaming?
        var portal: PacketPortal?
        do {
            let (address, originTrust) = try await Self.startOrigin(
                origin, group: originGroup, tls: tls, identity: identity)
            trust = originTrust
            let host = address.ipAddress ?? "127.0.0.1"
            let (started, portalAddress) = try await Self.startPortal(
                spec: profile.captivePortal, engine: engine, loop: originGroup.next(), tls: tls)
            portal = started
            let file = try TemporaryFiles.makeFile(kind: "hosts")
            hostsFile = file
            try Self.writeHosts(file, origin: host, portal: portalAddress, profile: profile)
            engine.learn(address: host, names: [Session.originHost])
            engine.learn(address: portalAddress, names: [CaptivePortal.host] + CaptivePortal.probeHosts)
            chmod(file, 0o644)
            let named = try await PacketNaming.start(
                origin: origin, group: originGroup, host: host, trust: originTrust,
                fixed: Self.hostsNames(origin: host, portal: portalAddress), dns64: profile.ipv6Only)
            naming = named
            let session = PacketSession(
                profile: profile, seed: seed, engine: engine, origin: origin, originAddress: address,
                trust: originTrust, hostsFile: file, naming: named, portal: started, originGroup: originGroup,
                stateChanges: stateChanges,
                identity: identity,
                sender: SenderReport(
                    wanted: profile.tcp.rawValue, origin: await origin.congestionControl(),
                    hostDefault: SenderCongestionControl.hostDefault))
            if let control {
                do {
                    try await session.startControl(host: control.host, port: control.port, guarding: guarding)
                } catch {
                    await session.stop()
                    throw Failure.control(String(describing: error))
                }
            }
            return session
        } catch let failure as Failure {
            throw failure
        } catch {
            await portal?.stop()
            await naming?.stop()
            trust?.remove()
            if let hostsFile { unlink(hostsFile) }
            try? await origin.stop()
            try? await originGroup.shutdownGracefully()
            engine.stop()
            throw .origin(String(describing: error))
        }
    }

    /// Starts the origin on an address of its own: HTTP on port 80, HTTPS on 443 with the run's CA
    /// (which the command's user, with `identity`, must be able to read).
    private static func startOrigin(
        _ origin: OriginServer, group: EventLoopGroup, tls: any TLSProvider, identity: ChildIdentity?
    ) async throws -> (address: SocketAddress, trust: OriginTrust) {
        let address = try await Self.freeAddress(offset: 0) { host in
            try await origin.start(group: group, host: host, port: 80)
        }
        let trust = try OriginTrust(
            host: Session.originHost, environment: ProcessInfo.processInfo.environment, tls: tls)
        do {
            if identity != nil, let problem = ChildIdentity.openForReading(trust.directory) {
                throw ChildIdentity.Failure(description: problem)
            }
            _ = try await origin.addListener(group: group, host: address.ipAddress ?? "127.0.0.1", port: 443) {
                try trust.prepare($0)
            }
        } catch {
            trust.remove()
            throw error
        }
        return (address, trust)
    }

    /// Starts the engine, checking the privilege first: nothing (not even a capture file) is made
    /// without it.
    private static func startEngine(
        profile: Profile, seed: UInt64, capture: (delivered: String?, dropped: String?), precise: Bool,
        onStateChange: @escaping @Sendable (LinkState, Span) -> Void
    ) throws(Failure) -> PacketEngine {
        do {
            try PacketPrivilege.check()
            var packetCapture: PacketCapture?
            if capture.delivered != nil || capture.dropped != nil {
                packetCapture = try PacketCapture(deliveredPath: capture.delivered, droppedPath: capture.dropped)
            }
            return try PacketEngine.start(
                profile: profile, seed: seed, capture: packetCapture, precise: precise, onStateChange: onStateChange)
        } catch {
            throw .engine(error)
        }
    }

    /// The captive portal (closed or open as `spec` says, or none) and the address of its HTTP
    /// server, which answers the portal's names (and what the cage's NAT sends it) on `loop`.
    private static func startPortal(
        spec: CaptivePortalSpec?, engine: PacketEngine, loop: EventLoop, tls: any TLSProvider
    ) async throws -> (portal: PacketPortal, address: String) {
        let box = NIOLockedValueBox<PacketPortal?>(nil)
        let bindHTTP: @Sendable (String, Int, Bool) async throws -> Channel = { host, port, intercepted in
            try await ServerBootstrap(group: loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        guard let portal = box.withLockedValue({ $0 }) else { throw ChannelError.ioOnClosedChannel }
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        let handler = PacketPortalHandler(portal: portal, intercepted: intercepted)
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .bind(host: host, port: port).get()
        }
        let named = try await Self.freeChannel(offset: 1) { host in try await bindHTTP(host, 80, false) }
        let address = named.localAddress?.ipAddress ?? "127.0.0.1"
        let started = try await PacketPortal.start(
            named: named, address: address, spec: spec, engine: engine, loop: loop, tls: tls, bindHTTP: bindHTTP)
        box.withLockedValue { $0 = started }
        return (started, address)
    }

    /// The command's /etc/hosts: the machine's, the origin's name and the portal's names, less any
    /// name the profile's `dns_fail` or a route's makes fail (its lookup then goes to DNS, which
    /// the engine answers "no such name"). Written in place: the command's mount sees every rewrite.
    static func writeHosts(_ file: String, origin: String, portal: String, profile: Profile) throws {
        var system = (try? String(contentsOfFile: "/etc/hosts", encoding: .utf8)) ?? "127.0.0.1\tlocalhost\n"
        if let nat64 = profile.ipv6Only { system = Self.synthesizedHosts(system, nat64) }
        var text = system + (system.hasSuffix("\n") ? "" : "\n")
        let setups = [profile.setup] + profile.routes.map(\.profile.setup)
        for (address, names) in [(origin, [Session.originHost]), (portal, Self.portalNames)] {
            let kept = names.filter { name in !setups.contains { $0.nameFails(name) } }
            // IPv6-only: the address DNS64 gives, in the NAT64 prefix.
            let given = profile.ipv6Only?.synthesized(text: address) ?? address
            if !kept.isEmpty { text += "\(given)\t\(kept.joined(separator: " "))\n" }
        }
        try text.write(toFile: file, atomically: false, encoding: .utf8)
    }

    /// The machine's hosts file as an IPv6-only device's DNS64 would give its names: an IPv4
    /// address (but loopback's, the device's own) in the NAT64 prefix; the rest as it is.
    static func synthesizedHosts(_ text: String, _ nat64: IPv6OnlySpec) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let first = fields.first, !first.hasPrefix("#"), !first.hasPrefix("127."),
                let synthesized = nat64.synthesized(text: String(first))
            else { return String(line) }
            return synthesized + line.dropFirst(line.distance(from: line.startIndex, to: first.endIndex))
        }.joined(separator: "\n")
    }

    /// The names that lead to the portal: its own and the OS connectivity probes' hosts.
    static let portalNames = [CaptivePortal.host] + CaptivePortal.probeHosts

    /// The names the hosts file gives (before `dns_fail` leaves some out), with their addresses.
    static func hostsNames(origin: String, portal: String) -> [(name: String, address: String)] {
        [(Session.originHost, origin)] + Self.portalNames.map { ($0, portal) }
    }

    /// Every name the run mapped to an address of its own, with it: the origin's and the portal's
    /// (the hosts file), then each name under `netcond.test` the responder answered, in the order
    /// given. The packet engine tells destinations apart by these addresses. Safe from any thread.
    public func knownNames() -> [(name: String, address: String)] {
        self.naming.names.knownNames()
    }

    /// A profile switch: the names `dns_fail` makes fail change with it, and its captive portal.
    func switched(to profile: Profile) async {
        // The run's addressing holds throughout: an IPv6-only run stays one (its cage refuses IPv4).
        var profile = profile
        profile.ipv6Only = self.profile.ipv6Only
        try? Self.writeHosts(
            self.hostsFile, origin: self.originAddress.ipAddress ?? "127.0.0.1", portal: self.portal.address,
            profile: profile)
        await self.portal.replace(with: profile.captivePortal)
        self.origin.replaceRoutes(with: profile.routes)
        // The origin's new connections send with the new profile's tcp, as the stream engine's do.
        await self.origin.setCongestionControl(profile.tcp.rawValue)
    }

    /// Binds with `bind` on the first address of 127.110.0.0/16 tried where it works (the origin's
    /// port 80, the portal's), from a random one on (never from netcond's process id: runs in PID
    /// namespaces of their own may all have the same); `offset` tells the two apart.
    /// Where this process's tries start: one random number, so the origin's and the portal's differ.
    private static let addressBase = Int.random(in: 0...0xffff)

    private static func freeAddress<T>(offset: Int, _ bind: (String) async throws -> T) async throws -> T {
        var lastError: Error?
        let base = Self.addressBase &+ offset &* 4099
        for attempt in 0..<16 {
            let n = (base &+ attempt &* 7919) & 0xffff
            let host = "127.110.\(n >> 8).\(max(1, min(254, n & 0xff)))"
            do {
                return try await bind(host)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? TemporaryFiles.Failure(description: "no free address in 127.110.0.0/16")
    }

    private static func freeChannel(offset: Int, _ bind: (String) async throws -> Channel) async throws -> Channel {
        try await Self.freeAddress(offset: offset, bind)
    }

    /// Live control, as in proxy mode. The command must reach it whatever the link does (to end an
    /// outage it started): its port bypasses the link.
    private func startControl(host: String, port: Int, guarding: ControlGuard?) async throws {
        let server = ControlServer(target: PacketControl(session: self), guarding: guarding)
        let address = try await server.start(host: host, port: port)
        self.control.withLockedValue { $0 = (server, "http://\(host):\(address.port ?? 0)") }
        try self.engine.cage.exempt(loopbackPort: address.port ?? 0)
    }

    /// The control API's URL (nil without one).
    public var controlURL: String? { self.control.withLockedValue { $0?.url } }

    /// The command's environment: `base` plus netcond's variables and the origin's trust; no proxy
    /// variable is set (every packet crosses the link without one).
    public func childEnvironment(base: [String: String]) -> [String: String] {
        var environment = self.identity?.environment(base) ?? base
        if let url = self.controlURL { environment["NETCOND_CONTROL"] = url }
        environment["NETCOND_ENGINE"] = "packet"
        environment["NETCOND_ORIGIN"] = "http://\(Session.originHost)"
        environment["NETCOND_SEED"] = String(self.seed)
        environment["NETCOND_PROFILE"] = self.profile.name
        for (name, value) in self.trust.environment { environment[name] = value }
        return environment
    }

    /// Starts the command in the cage, seeing the origin's name.
    public func spawn(
        _ command: [String], environment: [String: String], workingDirectory: String? = nil,
        output: (stdout: Int32, stderr: Int32)? = nil
    ) throws(ChildProcessError) -> ChildProcess {
        let procs: Int32
        do {
            procs = try self.engine.cage.openProcsFile()
        } catch {
            throw .spawnFailed(command.first ?? "", error.description)
        }
        defer { close(procs) }
        do {
            try self.engine.cage.refuseIPv4()
        } catch {
            throw .spawnFailed(command.first ?? "", error.description)
        }
        // The rules as they are before the command runs are the run's own.
        let watch =
            self.commandIsUncaged
            ? self.watch.withLockedValue { watch in
                if watch == nil { watch = CageWatch(cage: self.engine.cage) }
                return watch
            } : nil
        var onExit: (@Sendable (pid_t) -> Void)?
        if let watch { onExit = { pid in watch.ended(pid) } }
        let child = try ChildProcess.spawn(
            command, environment: environment, workingDirectory: workingDirectory, output: output, cgroup: procs,
            hostsFile: self.hostsFile, resolvFile: self.naming.resolvFile, identity: self.identity, onExit: onExit)
        watch?.follow(child.pid)
        return child
    }

    /// What a command run as root did to slip past the link (left the cgroup, changed the rules),
    /// in order; empty under `--user`, or when it did nothing of the kind. The watch stops here.
    public func breaches() -> [CageWatch.Breach] {
        self.watch.withLockedValue { $0 }?.finish() ?? []
    }

    /// The folder a scenario's client works in: `workdir` itself, or with `--user` a folder of that
    /// user's inside it (the one netcond removes stays its own); the reason when it could not be made.
    public func clientFolder(in workdir: String) -> (path: String, problem: String?) {
        guard let identity = self.identity else { return (workdir, nil) }
        let folder = (workdir as NSString).appendingPathComponent("client")
        // The user may pass through netcond's folder (and see nothing in it) to reach theirs.
        guard chmod(workdir, 0o711) == 0, mkdir(folder, 0o700) == 0 else {
            return (folder, "cannot make \(folder): \(String(cString: strerror(errno)))")
        }
        return (folder, identity.handOver(folder))
    }

    /// Ends what the command left running in the cage (and what left it), before the checks read
    /// its files.
    public func endLeftovers() {
        self.engine.cage.killProcesses()
        self.watch.withLockedValue { $0 }?.killEscaped()
    }

    /// Stops the engine (removing the cage and what still runs in it) and the origin.
    public func stop() async {
        if let control = self.control.withLockedValue({ state -> ControlServer? in
            defer { state = nil }
            return state?.server
        }) {
            await control.stop()
        }
        await self.portal.stop()
        if let watch = self.watch.withLockedValue({ $0 }) {
            _ = watch.finish()
            watch.killEscaped()
        }
        self.engine.stop()
        await self.naming.stop()
        try? await self.origin.stop()
        try? await self.originGroup.shutdownGracefully()
        self.trust.remove()
        unlink(self.hostsFile)
    }

    public func summary() -> PacketSummary { self.engine.summary() }

    /// `netcond: radio (lte): on 12.3 s of 30.1 s (41%), …` over the run so far, or to its stop
    /// (nil: the profile has no `radio:`).
    public func radioLine() async -> String? {
        guard let radio = await self.engine.radio() else { return nil }
        return "netcond: " + radioSummary(radio, upTo: .zero + self.summary().elapsed)
    }
}
