import Foundation
import NIOCore
import NIOPosix
import NetcondCore
import NetcondOrigin
import NetcondProxy

/// One netcond run's machinery: the built-in origin and the proxy, on their own threads.
///
/// The proxy runs every connection on one event loop (one emulated access link); the origin has a
/// loop of its own so that serving does not steal time from the link's timers.
public final class Session: Sendable {
    public let profile: Profile
    public let seed: UInt64
    public let proxyAddress: SocketAddress
    public let forwardAddresses: [SocketAddress]
    public let originAddress: SocketAddress
    /// The origin's HTTPS listener (`https://origin.netcond.test`) and the CA files clients trust
    /// it by; nil without a TLS library (port 443 of the origin is closed then).
    public let originTLSAddress: SocketAddress?
    public let trust: OriginTrust?
    public let origin: OriginServer
    /// Where the control API listens (nil when not served).
    public let controlAddress: SocketAddress?
    public let proxy: ProxyServer
    private let control: ControlServer?
    private let proxyGroup: MultiThreadedEventLoopGroup
    private let originGroup: MultiThreadedEventLoopGroup
    private let startedAt: NIODeadline

    /// The name clients use for the built-in origin.
    public static let originHost = OriginHost.name

    private init(
        profile: Profile,
        seed: UInt64,
        proxy: ProxyServer,
        addresses: ProxyAddresses,
        control: ControlServer?,
        controlAddress: SocketAddress?,
        origin: OriginServer,
        originAddress: SocketAddress,
        originTLSAddress: SocketAddress?,
        trust: OriginTrust?,
        proxyGroup: MultiThreadedEventLoopGroup,
        originGroup: MultiThreadedEventLoopGroup
    ) {
        self.profile = profile
        self.seed = seed
        self.proxy = proxy
        guard let proxyAddress = addresses.proxy else { preconditionFailure("a session's proxy serves as a proxy") }
        self.proxyAddress = proxyAddress
        self.forwardAddresses = addresses.forwards
        self.control = control
        self.controlAddress = controlAddress
        self.origin = origin
        self.originAddress = originAddress
        self.originTLSAddress = originTLSAddress
        self.trust = trust
        self.proxyGroup = proxyGroup
        self.originGroup = originGroup
        self.startedAt = .now()
    }

    /// With `tls`: the origin's HTTPS listener, and in `trust` the run's CA that its clients trust.
    private static func startOriginTLS(
        _ origin: OriginServer, group: EventLoopGroup, tls: (any TLSProvider)?, trust: inout OriginTrust?
    ) async throws -> SocketAddress? {
        guard let tls else { return nil }
        let originTrust = try OriginTrust(
            host: Self.originHost, environment: ProcessInfo.processInfo.environment, tls: tls)
        trust = originTrust
        return try await origin.addListener(group: group) { channel in try originTrust.prepare(channel) }
    }

    /// Starts the origin and the proxy. Throws a user-facing `ProxyStartError` when a port is taken.
    /// With a control API (or `liveChanges`) the link may be changed while it runs. With `tls` the
    /// origin serves HTTPS too and the captive portal may present its wrong certificate. With
    /// `splices` the forwards relay in the kernel while nothing needs to see their bytes.
    public static func start(
        profile: Profile,
        seed: UInt64,
        listenHost: String = "127.0.0.1",
        listenPort: Int = 0,
        forwards: [PortForward] = [],
        control: (host: String, port: Int)? = ("127.0.0.1", 0),
        guarding: ControlGuard? = nil,
        originContent: OriginContent = OriginContent(),
        liveChanges: Bool = false,
        splices: Bool = false,
        tls: (any TLSProvider)?,
        onStateChange: (@Sendable (LinkState, Span) -> Void)? = nil
    ) async throws -> Session {
        // What a netcond killed by SIGKILL left behind goes first.
        TemporaryFiles.removeStale()
        let originGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let proxyGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let origin = OriginServer(configuration: OriginConfiguration(content: originContent, faultSeed: seed))
        var trust: OriginTrust?
        do {
            let originAddress = try await origin.start(group: originGroup)
            let originTLSAddress = try await Self.startOriginTLS(origin, group: originGroup, tls: tls, trust: &trust)
            let proxy = ProxyServer(
                configuration: ProxyConfiguration(
                    profile: profile,
                    seed: seed,
                    listenHost: listenHost,
                    listenPort: listenPort,
                    forwards: forwards,
                    originAddress: originAddress,
                    originTLSAddress: originTLSAddress,
                    tls: tls,
                    controllable: control != nil || liveChanges
                ).splicing(splices),
                group: proxyGroup
            )
            var controlServer: ControlServer?
            do {
                if let onStateChange { await proxy.observeStateChanges(onStateChange) }
                let addresses = try await proxy.start()
                var controlAddress: SocketAddress?
                if let control {
                    let server = ControlServer(proxy: proxy, guarding: guarding)
                    controlServer = server
                    // The control API is in ProcessListeners: a client from another host may not
                    // reach it through the proxy, as it may not directly.
                    controlAddress = try await server.start(host: control.host, port: control.port)
                }
                return Session(
                    profile: profile,
                    seed: seed,
                    proxy: proxy,
                    addresses: addresses,
                    control: controlServer,
                    controlAddress: controlAddress,
                    origin: origin,
                    originAddress: originAddress,
                    originTLSAddress: originTLSAddress,
                    trust: trust,
                    proxyGroup: proxyGroup,
                    originGroup: originGroup
                )
            } catch {
                await controlServer?.stop()
                await proxy.stop()
                throw error
            }
        } catch {
            trust?.remove()
            try? await origin.stop()
            try? await proxyGroup.shutdownGracefully()
            try? await originGroup.shutdownGracefully()
            throw error
        }
    }

    /// `http://127.0.0.1:PORT`, what clients put in their proxy variables.
    public var proxyURL: String {
        "http://\(Self.hostPort(self.proxyAddress))"
    }

    /// `http://127.0.0.1:PORT` of the control API, when served.
    public var controlURL: String? {
        self.controlAddress.map { "http://\(Self.hostPort($0))" }
    }

    /// The environment a client runs with: `base` plus the proxy variables (both cases, since curl
    /// and wget ignore upper-case `HTTP_PROXY`), `NO_PROXY` emptied, and netcond's own variables.
    public func childEnvironment(base: [String: String]) -> [String: String] {
        var environment = base
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            environment[name] = self.proxyURL
            environment[name.lowercased()] = self.proxyURL
        }
        environment["NO_PROXY"] = ""
        environment["no_proxy"] = ""
        environment["NETCOND_PROXY"] = self.proxyURL
        environment["NETCOND_ORIGIN"] = "http://\(Self.originHost)"
        environment["NETCOND_SEED"] = String(self.seed)
        environment["NETCOND_PROFILE"] = self.profile.name
        if let controlURL = self.controlURL { environment["NETCOND_CONTROL"] = controlURL }
        environment["NETCOND_CAPTIVE_API"] = CaptivePortal.apiURL
        for (name, value) in self.trust?.environment ?? [:] { environment[name] = value }
        return environment
    }

    /// Closes every listener and connection and stops the threads.
    public func stop() async {
        await self.control?.stop()
        await self.proxy.stop()
        try? await self.origin.stop()
        try? await self.proxyGroup.shutdownGracefully()
        try? await self.originGroup.shutdownGracefully()
        self.trust?.remove()
    }

    public func summary() async -> ProxySummary {
        await self.proxy.summary()
    }

    /// The summary line; `named` is how the profile is named in it (its file's path with its name,
    /// when one was given). With a radio, its line follows (``radioLine()``).
    public func summaryLine(named: String? = nil) async -> String {
        "netcond: " + (await self.summaryText(named: named)) + ((await self.radioLine()).map { "\n" + $0 } ?? "")
    }

    public func summaryText() async -> String {
        await self.summaryText(named: nil)
    }

    /// `netcond: radio (lte): on 12.3 s of 30.1 s (41%), 2 promotions (4.0/min), ≈ 14 J` over the
    /// run so far (nil: the profile has no `radio:`).
    public func radioLine() async -> String? {
        guard let radio = await self.proxy.radio() else { return nil }
        let now = Instant(
            nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds) - Int64(radio.startedAt.uptimeNanoseconds))
        return "netcond: " + radioSummary(radio.model, upTo: now)
    }

    /// `lte: 3.2 s, up 616 B, down 20.7 KB, 4 connections, no segment lost (seed 5)`.
    public func summaryText(named: String?) async -> String {
        let summary = await self.summary()
        let elapsed = Span(nanoseconds: Int64(NIODeadline.now().uptimeNanoseconds - self.startedAt.uptimeNanoseconds))
        return Self.summaryText(
            profile: named ?? self.profile.name, seed: self.seed, elapsed: elapsed, summary: summary,
            sender: Self.senderText(self.profile))
    }

    /// Which TCP sender the stream engine emulates: the model of the profile's `tcp:`, for every
    /// server (the real server's own kernel sends only to the proxy, over loopback).
    public static func senderText(_ profile: Profile) -> String {
        "every TCP sender modelled as \(profile.tcp) (the profile's tcp)"
    }

    public static func summaryText(
        profile: String, seed: UInt64, elapsed: Span, summary: ProxySummary, sender: String? = nil
    ) -> String {
        let link = summary.link
        var parts = [
            "\(formatSeconds(elapsed))",
            "up \(formatBytes(summary.bytesUp)), down \(formatBytes(summary.bytesDown))",
            "\(summary.connections) connection\(summary.connections == 1 ? "" : "s")",
            Self.lossText(link),
        ]
        let cut = link.resets + link.closes
        if cut > 0 { parts.append("\(cut) connection\(cut == 1 ? "" : "s") cut by the link") }
        if summary.upstreamFailures > 0 { parts.append("\(summary.upstreamFailures) upstream failures") }
        if summary.badRequests > 0 { parts.append("\(summary.badRequests) bad requests") }
        let late = summary.timerLateness
        if late.beyondRange > 0 {
            parts.append(
                "netcond was held up \(late.beyondRange) time\(late.beyondRange == 1 ? "" : "s") for over "
                    + "\(LatenessHistogram.range.nanoseconds / 1_000_000) ms (longest "
                    + "\(late.maximum.nanoseconds / 1_000_000) ms): the machine is overloaded and the link's timing "
                    + "was off by as much"
            )
        }
        if let sender { parts.append(sender) }
        return "\(profile): " + parts.joined(separator: ", ") + " (seed \(seed))"
    }

    /// `no segment lost`, or `15 segments lost (15 by the full queue), 31 held behind a loss`.
    static func lossText(_ link: LinkCounters) -> String {
        let lost = link.segmentsLost + link.queueDrops + link.outageDrops
        guard lost > 0 else { return "no segment lost" }
        var causes: [String] = []
        if link.queueDrops > 0 { causes.append("\(link.queueDrops) by the full queue") }
        if link.outageDrops > 0 { causes.append("\(link.outageDrops) in outages") }
        var text = "\(lost) segment\(lost == 1 ? "" : "s") lost"
        if !causes.isEmpty { text += " (" + causes.joined(separator: ", ") + ")" }
        if link.segmentsDelayed > 0 { text += ", \(link.segmentsDelayed) held behind a loss" }
        return text
    }

    /// `127.0.0.1:PORT`, or `[::1]:PORT`: an address as a URL's authority.
    public static func hostPort(_ address: SocketAddress) -> String {
        ListenerExposure.display(address.ipAddress ?? "127.0.0.1", address.port ?? 0)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
