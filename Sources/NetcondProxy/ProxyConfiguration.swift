import CNetcondSystem
import NIOCore
import NIOPosix
import NetcondCore

/// A port forward: connections to `listen` are relayed to `target` through the emulated link.
public struct PortForward: Sendable, Equatable, CustomStringConvertible {
    public var listenHost: String
    public var listenPort: Int
    public var targetHost: String
    public var targetPort: Int

    public init(listenHost: String, listenPort: Int, targetHost: String, targetPort: Int) {
        self.listenHost = listenHost
        self.listenPort = listenPort
        self.targetHost = targetHost
        self.targetPort = targetPort
    }

    public var description: String { "\(self.listenHost):\(self.listenPort)=\(self.targetHost):\(self.targetPort)" }

    /// True when the target, as written, is this forward's own listener (any other spelling is
    /// caught when the connection is made: `UpstreamError.loop`).
    public var targetsItself: Bool {
        guard self.listenPort == self.targetPort else { return false }
        let loopback: Set<String> = ["localhost", "127.0.0.1", "::1", "::ffff:127.0.0.1"]
        let listen = self.listenHost.lowercased(), target = self.targetHost.lowercased()
        if listen == target { return true }
        if listen == "0.0.0.0" || listen == "::" { return loopback.contains(target) || target.hasPrefix("127.") }
        return loopback.contains(listen) && loopback.contains(target)
    }
}

/// What a proxy run needs to know.
public struct ProxyConfiguration: Sendable {
    public var profile: Profile
    public var seed: UInt64
    public var listenHost: String
    /// 0 picks a free port.
    public var listenPort: Int
    public var forwards: [PortForward]
    /// Where `origin.netcond.test` (and any other `*.netcond.test`) goes; nil = not served.
    public var originAddress: SocketAddress?
    /// The built-in origin's HTTPS listener: where `origin.netcond.test:443` goes (nil: that port
    /// is closed).
    public var originTLSAddress: SocketAddress?
    /// The TLS library for the captive portal's wrong certificate; nil: a profile that needs it
    /// is refused (``Profile/tlsRefusal``).
    public var tls: (any TLSProvider)?
    /// Conditions may change while running (control API): every connection goes through the link
    /// model even when the profile imposes nothing, so a later switch shapes it too.
    public var controllable: Bool
    /// How long before a deadline a quiet link wakes to spin to it (zero: never spin).
    public var timerSpin: Span
    /// Whether to listen as a proxy (HTTP, CONNECT, SOCKS5) at `listenHost:listenPort`; without,
    /// only the forwards listen (the Toxiproxy API's proxies).
    public var servesProxy: Bool = true
    /// Called on the loop for each connection a forward accepts, with the forward, once netcond's
    /// handlers are in place: a caller's own handler goes first in its pipeline (next to the
    /// client's socket).
    public var forwardConnectionHook: (@Sendable (Channel, PortForward) throws -> Void)?
    /// When a forward's upstream cannot be reached, close the client's connection (a FIN, as
    /// Toxiproxy does) instead of resetting it (as a refused connection would look).
    public var forwardClosesOnUpstreamFailure = false
    /// Whether a forward's connections may be relayed by the kernel (splice(2)) while nothing needs
    /// to see their bytes (see ``SpliceDecision``); they come back under the link when anything
    /// changes. Off unless asked for: `netcond proxy` asks, a scenario (its evidence) does not.
    public var splicesPassThrough = false

    public init(
        profile: Profile,
        seed: UInt64,
        listenHost: String = "127.0.0.1",
        listenPort: Int = 0,
        forwards: [PortForward] = [],
        originAddress: SocketAddress? = nil,
        originTLSAddress: SocketAddress? = nil,
        tls: (any TLSProvider)? = nil,
        controllable: Bool = false,
        timerSpin: Span = .microseconds(300)
    ) {
        self.profile = profile
        self.seed = seed
        self.listenHost = listenHost
        self.listenPort = listenPort
        self.forwards = forwards
        self.originAddress = originAddress
        self.originTLSAddress = originTLSAddress
        self.tls = tls
        self.controllable = controllable
        self.timerSpin = timerSpin
    }
}

extension ProxyConfiguration {
    /// This configuration with ``splicesPassThrough`` set to `splices`.
    public func splicing(_ splices: Bool) -> ProxyConfiguration {
        var configuration = self
        configuration.splicesPassThrough = splices
        return configuration
    }
}

/// Where a started proxy listens.
public struct ProxyAddresses: Sendable {
    /// Nil when the configuration serves no proxy (forwards only).
    public var proxy: SocketAddress?
    public var forwards: [SocketAddress]
}

/// Errors starting the proxy, worded for users.
public struct ProxyStartError: Error, CustomStringConvertible {
    public var description: String
    /// The address to listen on was taken (EADDRINUSE): the Toxiproxy API words that as Go does.
    public var addressInUse = false

    public init(description: String, addressInUse: Bool = false) {
        self.description = description
        self.addressInUse = addressInUse
    }
}
