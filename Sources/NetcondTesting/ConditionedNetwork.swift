import Foundation
import NIOCore
import NetcondCore
import NetcondOrigin
import NetcondProxy
import NetcondScenario

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A profile for ``Netcond/start(profile:seed:tls:)``: a built-in one by name (`.edge`, `"3g"`), or a
/// profile YAML file (`.file("Tests/slow-link.yaml")`).
public struct NetworkProfile: Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    enum Source: Sendable {
        case name(String)
        case file(String)
        case profile(Profile)
    }

    let source: Source

    public init(stringLiteral name: String) {
        self.source = .name(name)
    }

    /// A built-in profile by name (`netcond profiles` lists them).
    public static func named(_ name: String) -> NetworkProfile { NetworkProfile(stringLiteral: name) }
    /// A profile YAML file, relative to the working directory (a test's is the package's root).
    public static func file(_ path: String) -> NetworkProfile { NetworkProfile(source: .file(path)) }
    /// A profile built in code.
    public static func profile(_ profile: Profile) -> NetworkProfile { NetworkProfile(source: .profile(profile)) }

    /// No conditions: the link passes everything at once. Every built-in profile has a static
    /// name too (`.edge`, `.threeG`, `.satelliteLEO`; ``builtIn`` lists them), generated with the
    /// built-in profile table.
    public static let none: NetworkProfile = "none"

    private init(source: Source) {
        self.source = source
    }

    public var description: String {
        switch self.source {
        case .name(let name): return name
        case .file(let path): return path
        case .profile(let profile): return profile.name
        }
    }

    /// The profile, read and checked (a file's errors name file:line:column).
    public func resolve() throws -> Profile {
        switch self.source {
        case .name(let name):
            return try ProfileCatalog.resolve(name)
        case .file(let path):
            return try ProfileCatalog.resolve(path)
        case .profile(let profile):
            return profile
        }
    }
}

/// A conditioned network in this process: netcond's proxy (HTTP, CONNECT, SOCKS5) over the
/// profile's emulated link and the built-in origin behind it, as `netcond run` starts them.
///
/// Clients reach servers through it in either of two ways:
/// - a proxy: ``proxyURL`` (for clients that take one; on Apple platforms
///   `urlSessionConfiguration` is set up with it);
/// - a forward: ``originURL`` is the built-in origin through the link at a loopback port of its
///   own, and ``forward(to:port:)`` makes one to any server, for clients that cannot be given a
///   proxy (URLSession on Linux ignores proxy settings of its configuration).
///
/// Change the conditions while a test runs (``startOutage(_:)``, ``stall(_:)``, ``switchProfile(to:)``,
/// ``cut(_:)``, ``addFault(yaml:)``, ``setCaptivePortal(open:)``), read ``status()``, ``events()``
/// and ``originRequests``. ``stop()`` closes every listener and connection.
public final class ConditionedNetwork: Sendable {
    let session: Session
    /// `http://127.0.0.1:PORT`: the proxy.
    public let proxyURL: URL
    /// The built-in origin through the link, at a loopback port (`http://127.0.0.1:PORT`).
    public let originURL: URL
    /// The seed every loss and jitter decision comes from (print it to repeat a run).
    public let seed: UInt64

    init(session: Session) {
        self.session = session
        self.proxyURL = URL(string: session.proxyURL)!
        self.originURL = URL(string: "http://\(Session.hostPort(session.forwardAddresses[0]))")!
        self.seed = session.seed
    }

    /// The name the built-in origin has through the proxy (`http://origin.netcond.test`).
    public static let originHost = Session.originHost

    /// The profile the run started with.
    public var profileName: String { self.session.profile.name }

    #if canImport(Darwin)
    /// An ephemeral configuration whose HTTP and HTTPS traffic goes through the proxy.
    public var urlSessionConfiguration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        let port = self.proxyURL.port ?? 0
        configuration.connectionProxyDictionary = [
            "HTTPEnable": true, "HTTPProxy": "127.0.0.1", "HTTPPort": port,
            "HTTPSEnable": true, "HTTPSProxy": "127.0.0.1", "HTTPSPort": port,
        ]
        return configuration
    }
    #endif

    /// A forward through the link to `host:port` (any server, e.g. one the test started on
    /// loopback); returns its base URL, `http://127.0.0.1:PORT`.
    public func forward(to host: String, port: Int) async throws -> URL {
        let address = try await self.session.proxy.addForward(
            PortForward(listenHost: "127.0.0.1", listenPort: 0, targetHost: host, targetPort: port))
        return URL(string: "http://\(Session.hostPort(address))")!
    }

    /// The environment `netcond run` gives a program (proxy variables, `NETCOND_*`, the origin's
    /// CA), for a child process the test starts itself.
    public var environment: [String: String] {
        self.session.childEnvironment(base: ProcessInfo.processInfo.environment)
    }

    // MARK: - Changing the conditions

    /// Starts an outage: `.blackhole` (nothing answers), `.refuse` (new connections refused) or
    /// `.reset` (every connection reset, new ones refused).
    public func startOutage(_ behaviour: OutageBehaviour = .blackhole) async {
        await self.session.proxy.apply(.outage(behaviour))
    }

    public func endOutage() async {
        await self.session.proxy.apply(.outage(nil))
    }

    /// Stalls a direction (`.down`, `.up`, `.both`): bytes are held, connections stay open.
    public func stall(_ direction: StallDirection = .both) async {
        await self.session.proxy.apply(.stall(direction))
    }

    public func endStall() async {
        await self.session.proxy.apply(.stall(nil))
    }

    /// Switches to another profile (its schedule starts over); connections stay open.
    public func switchProfile(to profile: NetworkProfile) async throws {
        let resolved = try profile.resolve()
        if let refusal = resolved.proxyRefusal(hasTLS: self.session.proxy.configuration.tls != nil) {
            throw NetcondTestingError(description: refusal)
        }
        await self.session.proxy.apply(.switchProfile(resolved))
    }

    /// Cuts every open connection once: `.reset` (the client reads a reset) or `.close` (the
    /// stream ends early).
    public func cut(_ mode: CutMode = .reset) async {
        await self.session.proxy.apply(.cut(mode))
    }

    /// Adds an HTTP fault, written as a profile's `faults:` entry (`{status: 503, first: 2}`).
    public func addFault(yaml: String) async throws {
        let fault = try HTTPFault.decode(yaml: yaml, file: "fault")
        await self.session.proxy.apply(.addFault(fault))
    }

    /// Removes every HTTP fault.
    public func removeFaults() async {
        await self.session.proxy.apply(.removeFault(nil))
    }

    /// Opens (logs in) or closes the captive portal of a profile that has one.
    public func setCaptivePortal(open: Bool) async throws {
        guard self.session.proxy.configuration.profile.captivePortal != nil || open else {
            throw NetcondTestingError(description: "the profile '\(self.profileName)' has no captive portal")
        }
        await self.session.proxy.apply(.captive(open: open))
    }

    // MARK: - Reading what happened

    /// The link's state and counters now.
    public func status() async -> ControlStatus? {
        await self.session.proxy.status()
    }

    /// The run's events so far (faults hit, link changes, failed connection attempts).
    public func events() async -> [ProxyEvent] {
        await self.session.proxy.eventLog().events
    }

    /// Every request the built-in origin received, in order.
    public var originRequests: [OriginRequest] {
        self.session.origin.requestLog.entries
    }

    /// `edge: 9.15 s, up 128 B, down 200.2 KB, 1 connection, no segment lost (seed 1)`.
    public func summary() async -> String {
        await self.session.summaryText()
    }

    /// Why the test that ran on this network ran under no conditions, or nil: no connection reached
    /// its proxy or forwards, so whatever the test saw, the link's conditions had no part in it.
    public func nothingCrossed() async -> String? {
        guard let status = await self.status(), status.connectionsTotal == 0 else { return nil }
        return "nothing crossed the conditioned network (\(self.profileName)): no connection reached its proxy "
            + "(\(self.proxyURL.absoluteString)) or its forwards (originURL \(self.originURL.absoluteString)), so the test "
            + "ran under no conditions at all. Likely: the client was given another URL (one written by hand instead "
            + "of network.originURL or network.forward(to:port:)), or ignored the proxy (URLSession on Linux ignores a "
            + "configuration's proxy: use the forwards; a process-wide http_proxy sends every test's traffic to one "
            + "network). A test that means to make no connection: .network(…, requiresTraffic: false)."
    }

    /// Closes every listener and connection, stops the threads and removes the run's files.
    public func stop() async {
        await self.session.stop()
    }
}

/// A mistake in how NetcondTesting was asked to do something.
public struct NetcondTestingError: Error, CustomStringConvertible {
    public var description: String
}

/// Entry points: start a conditioned network, and the one a trait started for the current test.
public enum Netcond {
    /// Starts the proxy, its link and the built-in origin in this process. `seed`: default
    /// `NETCOND_SEED`, else random (read it back from ``ConditionedNetwork/seed``). `tls`: a TLS
    /// library (`.nioSSL`, from the `NetcondTLS` product) for the origin's `https://` and a captive
    /// portal's wrong certificate; without one the origin's port 443 is closed, and such a portal
    /// is refused.
    public static func start(
        profile: NetworkProfile = .none, seed: UInt64? = nil, tls: (any TLSProvider)? = nil
    ) async throws -> ConditionedNetwork {
        let resolved = try profile.resolve()
        if let refusal = resolved.proxyRefusal(hasTLS: tls != nil) { throw NetcondTestingError(description: refusal) }
        let seed = Self.seed(seed)
        let session = try await Session.start(
            profile: resolved, seed: seed,
            forwards: [
                PortForward(listenHost: "127.0.0.1", listenPort: 0, targetHost: Session.originHost, targetPort: 80)
            ],
            control: nil, liveChanges: true, tls: tls)
        return ConditionedNetwork(session: session)
    }

    /// `seed`, else `NETCOND_SEED`, else a random one (each run reports the one it used).
    static func seed(_ given: UInt64?) -> UInt64 {
        given ?? ProcessInfo.processInfo.environment["NETCOND_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...999_999)
    }

    /// The network a ``NetworkTrait`` (`@Test(.network(.edge))`) or
    /// `XCTestCase.withConditionedNetwork` started for the code running now.
    @TaskLocal public static var current: ConditionedNetwork?
}
