import CNetcondSystem
import NIOCore
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// Whether a port forward's new connection may skip NIO and be relayed with splice(2)
/// (``ProxyServer`` `spliceIfAllowedOnLoop`): only when nothing would see or shape its bytes.
///
/// The link imposes nothing (a pass-through profile: no latency, rate, loss, queue, schedule,
/// stall, set-up cost, captive portal, route, radio; no outage in force, no stranded connection),
/// no fault is in force, nothing else watches the forward's connections (Toxiproxy's hook and its
/// close-on-failure), and the target is an address (a name's lookup belongs to the link) that is
/// none of netcond's own listeners (a loop). The run must ask for it
/// (``ProxyConfiguration/splicesPassThrough``): `netcond proxy` does; a scenario, whose evidence
/// reads every connection's bytes, and the Toxiproxy API do not.
enum SpliceDecision {
    struct Conditions: Equatable {
        var enabled = true
        var profileIsPassThrough = true
        var linkIsTransparent = true
        var faults = 0
        var watchedByHook = false
        var targetIsAddress = true
        var targetIsOwnListener = false
        var accepting = true
        var relays = 0
        /// Connections open under NIO or on their way to it from a relay (two descriptors each), and
        /// the process's descriptor limit.
        var connections = 0
        var descriptorLimit = Int.max
    }

    /// Descriptors a relay holds beyond its two sockets: two pipes, an eventfd, an epoll.
    static let extraDescriptors = 6
    /// Descriptors kept free for everything else (listeners, the control API, files, a burst).
    static let descriptorReserve = 512

    /// Whether the relays' extra descriptors would take what connections need: true once the open
    /// connections (two each, spliced or not, one more arriving), the extra of as many relays as
    /// may run (``limit``) and the reserve reach the limit. Then every relay goes back to NIO and
    /// no new one starts: near the limit a spliced connection (8 descriptors) would cost other
    /// connections theirs (2 each). The answer depends only on how many connections are open, not
    /// on how many are spliced, so handing the relays back does not make room for a new one: it
    /// stays so until connections close (no splice, hand back, splice again at each arrival).
    static func descriptorsShort(_ c: Conditions) -> Bool {
        let needed = 2 * (c.connections + c.relays + 1) + Self.extraDescriptors * Self.limit + Self.descriptorReserve
        return needed > c.descriptorLimit
    }

    /// This process's descriptor limit (`ulimit -n`, the soft one), nil when unlimited or unknown.
    static func processDescriptorLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(Int.max) else {
            return nil
        }
        return Int(limit.rlim_cur)
    }

    /// At most this many connections are spliced at once (each has a thread); the rest go
    /// through NIO.
    static let limit = 64

    /// Why the connection may not be spliced (nil: it may).
    static func refusal(_ c: Conditions) -> String? {
        if !c.enabled { return "this run does not splice" }
        if !c.profileIsPassThrough { return "the profile has conditions" }
        if !c.linkIsTransparent { return "the link is not transparent now" }
        if c.faults > 0 { return "faults are in force" }
        if c.watchedByHook { return "the forward's connections are watched" }
        if !c.targetIsAddress { return "the target is a name" }
        if c.targetIsOwnListener { return "the target is one of netcond's listeners" }
        if !c.accepting { return "the forward is closing" }
        if c.relays >= Self.limit { return "\(Self.limit) connections are spliced already" }
        if Self.descriptorsShort(c) { return "descriptors are short" }
        return nil
    }

    /// Whether `target` may be one of this process's listeners: any with its port, whatever its
    /// address (a wildcard listener's included): in doubt, no splice.
    static func isOwnListener(_ target: SocketAddress, among listeners: [SocketAddress]) -> Bool {
        listeners.contains { $0.port == target.port }
    }
}

/// The descriptor of a connection NIO accepted, before NIO registers it: NIO has no API for it, so
/// it is read from NIO's own objects by reflection (the channel's `socket`, that socket's
/// `descriptor`), and `netcond_take_socket` takes it only when its addresses are the channel's.
/// nil when NIO is not laid out so (another NIO version): then nothing is spliced. In constant
/// time: finding it by its addresses among every descriptor (as before) cost 3 µs per descriptor
/// open, 25 ms of the proxy's loop per splice with 5,000 connections open.
enum AcceptedDescriptor {
    static func of(_ channel: Channel) -> Int32? {
        guard let socket = Self.stored("socket", of: channel) else { return nil }
        return Self.stored("descriptor", of: socket) as? Int32
    }

    /// The stored property `label` of `subject`'s class or of one of its superclasses.
    private static func stored(_ label: String, of subject: Any) -> Any? {
        var mirror: Mirror? = Mirror(reflecting: subject)
        while let level = mirror {
            if let found = level.children.first(where: { $0.label == label }) { return found.value }
            mirror = level.superclassMirror
        }
        return nil
    }
}

/// The bytes every spliced connection of a run moved each way, counted by the relays' threads.
///
/// `@unchecked Sendable`: its only state is the C counters, which the relays add to and this
/// reads with atomic operations only (`netcond_relay_total`); it lives until the last relay that
/// holds it (through its ``RelayNotice``) has made its last call.
final class SpliceTotals: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<netcond_relay_totals>

    init() {
        self.pointer = .allocate(capacity: 1)
        self.pointer.initialize(to: netcond_relay_totals())
    }

    deinit {
        self.pointer.deallocate()
    }

    var up: Int64 { Int64(netcond_relay_total(self.pointer, 0)) }
    var down: Int64 { Int64(netcond_relay_total(self.pointer, 1)) }
}

/// What a relay's thread carries (retained) until its last call, which hands it to the proxy's
/// loop: which relay ended, and the counters it adds to.
final class RelayNotice: Sendable {
    let server: ProxyServer
    let id: Int
    let totals: SpliceTotals

    init(server: ProxyServer, id: Int, totals: SpliceTotals) {
        self.server = server
        self.id = id
        self.totals = totals
    }
}

/// One spliced connection, on the proxy's loop: its relay, its client's record, and how its
/// forward sets a connection up (for a client handed back before its upstream was made).
final class SplicedConnection {
    let relay: OpaquePointer
    let record: ClientConnectionRecord
    let setUp: ProxyServer.ClientSetUp

    init(relay: OpaquePointer, record: ClientConnectionRecord, setUp: @escaping ProxyServer.ClientSetUp) {
        self.relay = relay
        self.record = record
        self.setUp = setUp
    }
}

/// What a relay handed back: its sockets and the bytes that were in its pipes.
struct RelayHandBack {
    var clientFD: Int32
    /// -1: the upstream's connect failed (``connectError``), or netcond stops.
    var upstreamFD: Int32
    var up: [UInt8]
    var down: [UInt8]
    /// Why the upstream's connect failed (an errno; 0: it did not).
    var connectError: Int32

    enum Reclaimed {
        /// Asked back while its upstream's connect is under way: the relay gives the connection
        /// back once the connect is over (its `ended` call).
        case deferred
        /// The relay stopped and is freed: what it handed back (nil: it had ended, both sockets
        /// closed), and the bytes it moved each way.
        case done(RelayHandBack?, up: Int64, down: Int64)
    }

    /// Takes the relay's sockets and pipe bytes, then frees it; `waitingForConnect`: a connect
    /// under way is waited for by the relay (deferred), else it is abandoned (netcond stops).
    static func reclaim(_ relay: OpaquePointer, waitingForConnect: Bool) -> Reclaimed {
        var back = netcond_relay_handback()
        let given = netcond_relay_hand_back(relay, waitingForConnect ? 1 : 0, &back)
        if given == 2 { return .deferred }
        let up = Int64(netcond_relay_moved(relay, 0))
        let down = Int64(netcond_relay_moved(relay, 1))
        let connectError = netcond_relay_connect_error(relay)
        netcond_relay_free(relay)
        guard given == 1 else { return .done(nil, up: up, down: down) }
        let handBack = RelayHandBack(
            clientFD: back.client_fd, upstreamFD: back.upstream_fd,
            up: Self.take(back.up, back.up_length), down: Self.take(back.down, back.down_length),
            connectError: back.upstream_fd < 0 ? connectError : 0)
        return .done(handBack, up: up, down: down)
    }

    /// The failed connect as NIO's own connect reports it (the ordinary path then says and does
    /// what it does for a connect of its own that failed so).
    var connectFailure: Error? {
        guard self.connectError != 0 else { return nil }
        if self.connectError == ETIMEDOUT {
            return ChannelError.connectTimeout(.milliseconds(Int64(NETCOND_RELAY_CONNECT_TIMEOUT_MS)))
        }
        return IOError(errnoCode: self.connectError, reason: "connect")
    }

    private static func take(_ bytes: UnsafeMutablePointer<UInt8>?, _ length: Int) -> [UInt8] {
        guard let bytes else { return [] }
        defer { free(bytes) }
        return Array(UnsafeBufferPointer(start: bytes, count: length))
    }
}
