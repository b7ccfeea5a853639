import NIOCore
import NetcondCore

/// Where the origin takes "now" for its request log.
///
/// The default reads the monotonic clock (`CLOCK_MONOTONIC` via `NIODeadline`); tests inject a manual one so log
/// timestamps are exact. Only the log reads it: delays are timed by the channel's event loop, so handler tests can
/// drive them with `EmbeddedEventLoop.advanceTime`.
public struct OriginClock: Sendable {
    /// Returns the current instant, in nanoseconds since an arbitrary (per-clock) epoch.
    public let now: @Sendable () -> Instant

    public init(now: @escaping @Sendable () -> Instant) {
        self.now = now
    }

    /// The process's monotonic clock.
    public static let monotonic = OriginClock {
        Instant(nanoseconds: Int64(clamping: NIODeadline.now().uptimeNanoseconds))
    }
}

/// Settings of the built-in origin server. The defaults are what `netcond run` uses.
public struct OriginConfiguration: Sendable {
    /// Clock for request-log timestamps.
    public var clock: OriginClock
    /// Size of each generated body chunk handed to the channel; a body is never built whole in memory.
    public var chunkSize: Int
    /// Largest body `/bytes/{size}` serves.
    public var maximumSize: ByteCount
    /// Longest wait `/delay/{duration}` accepts.
    public var maximumDelay: Span
    /// The fixed `Last-Modified` of every generated file (an IMF-fixdate).
    public var lastModified: String
    /// A scenario's named files, endpoints and faults (`/files/{name}`, `/api/{name}`).
    public var content: OriginContent
    /// The seed an origin fault's `fraction:` draws from (a scenario's seed).
    public var faultSeed: UInt64
    /// The TCP congestion control its sockets send with (Linux `TCP_CONGESTION`: `cubic`, `bbr`…);
    /// nil: the host's default. Under the packet engine the profile's `tcp:`, so the kernel's
    /// sender is the one the stream engine models.
    public var congestionControl: String?
    /// Routes whose `faults:` the origin carries out, on the requests whose host (and port) take
    /// the route: under the packet engine, which reads no HTTP, the route's faults happen here
    /// (``OriginServer/replaceRoutes(with:)`` on a profile switch). Nil: none, ever (under the proxy
    /// the proxy does them).
    public var routes: [Route]?

    public init(
        clock: OriginClock = .monotonic,
        chunkSize: Int = 64 * 1024,
        maximumSize: ByteCount = ByteCount(bytes: 4 << 30),
        maximumDelay: Span = .seconds(Int64(60)),
        lastModified: String = "Mon, 01 Jan 2024 00:00:00 GMT",
        content: OriginContent = OriginContent(),
        faultSeed: UInt64 = 0,
        congestionControl: String? = nil,
        routes: [Route]? = nil
    ) {
        self.routes = routes
        precondition(chunkSize > 0, "chunk size must be positive")
        self.clock = clock
        self.chunkSize = chunkSize
        self.maximumSize = maximumSize
        self.maximumDelay = maximumDelay
        self.lastModified = lastModified
        self.content = content
        self.faultSeed = faultSeed
        self.congestionControl = congestionControl
    }
}
