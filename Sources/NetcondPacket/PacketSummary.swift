import CNetcondPacket
import NetcondCore

/// A packet the kernel holds until the link delivers it.
struct HeldPacket {
    var queue: UInt16
    var id: UInt32
    var mark: UInt32
    /// Its TCP header, when it is TCP (the flow table follows what was delivered).
    var tcp: TCPHeader?
    /// Its bytes, when a capture is written or the link changes or copies it.
    var bytes: [UInt8]? = nil
    var length: UInt32 = 0
    /// What the driver counts it as when a route's path drops it later: its bytes on the wire, its
    /// segments (a GSO packet taken whole), and its connection's route (-1: none).
    var wireLength: UInt32 = 0
    var segments: UInt32 = 1
    var route: Int32 = -1
    /// An IPv6-only run's NAT64 (``NAT64``): 0 none; ``translateOut``: the cage's packet to the
    /// prefix, sent on as IPv4 when delivered; ``translatedIn``: a server's IPv4 packet, already
    /// IPv6 in `bytes`, which go to the cage when delivered. The original is dropped either way.
    var nat64: UInt8 = 0
    /// When the engine let it go before the link decided (``PacketLinkDriver/passesAtOnce(_:)``):
    /// its verdict is out, and the link's decision only counts it (nil: the verdict waits for it).
    var letGoAt: Instant? = nil
    static let translateOut: UInt8 = 1
    static let translatedIn: UInt8 = 2

    init(queue: UInt16, id: UInt32, mark: UInt32, tcp: TCPHeader?, length: UInt32) {
        self.queue = queue
        self.id = id
        self.mark = mark
        self.tcp = tcp
        self.length = length
    }

    init(_ packet: ncq_packet, tcp: TCPHeader?) {
        self.queue = packet.queue
        self.id = packet.id
        self.mark = packet.mark | PacketCage.passedBit
        self.tcp = tcp
        self.length = packet.length
    }
}

/// A DNS lookup `dns_fail` failed: the name, and when the query reached the link.
public struct PacketLookupFailure: Sendable, Equatable {
    public var name: String
    public var at: Instant
}

/// What crossed the packet engine's link.
public struct PacketSummary: Sendable, Equatable {
    public struct Direction: Sendable, Equatable {
        /// Wire packets offered to the link (a GSO packet taken whole counts as its segments).
        public var packets = 0
        /// Bytes of the packets delivered.
        public var bytes: Int64 = 0
        public var lost = 0
        public var queueDrops = 0
        /// Dropped by CoDel at the head of the queue.
        public var aqmDrops = 0
        /// Delivered twice (`duplicate`), and delivered with a bit changed (`corrupt`).
        public var duplicated = 0
        public var corrupted = 0
        /// Dropped because a `blackhole` outage was in force.
        public var outageDrops = 0
    }
    public var directions = [Direction(), Direction()]
    public var up: Direction { self.directions[0] }
    public var down: Direction { self.directions[1] }
    /// Packets the kernel dropped while netcond held them (its answer to their verdict was "no such
    /// packet"): another program changed the firewall, which flushes every NFQUEUE.
    public var vanished = 0
    /// TCP connections seen starting (either way).
    public var connections = 0
    /// TCP connections followed now (open, as far as the link has seen).
    public var connectionsOpen = 0
    /// Packets the kernel dropped because netcond could not read them fast enough.
    public var kernelDrops = 0
    /// An IPv6-only run's packets its NAT64 could not translate or send on (an IPv4 fragment, an
    /// ICMP error, an IPv6 extension header), dropped.
    public var untranslated = 0
    /// Connections refused by a `refuse` or `reset` outage (their SYN answered with a reset).
    public var refusedConnections = 0
    /// Connections cut by a `reset` outage or `netcond ctl cut`: a reset sent to each end.
    public var connectionsCut = 0
    /// TCP connections a handover left on the network the device left.
    public var connectionsStranded = 0
    /// Packets a closed captive portal stopped (connections it reset or swallowed, UDP, pings).
    public var portalStopped = 0
    /// Packets the profile's firewall stopped; connections `connect_hold` held; DNS queries
    /// answered NXDOMAIN for `dns_fail`.
    public var firewallStopped = 0
    public var connectsHeld = 0
    public var lookupsFailed = 0
    /// Duplicates the raw socket could not send.
    public var copiesNotSent = 0
    /// Resets the raw socket could not send.
    public var resetsNotSent = 0
    /// Packets let go before the link decided, as certain to pass at once, that the link then
    /// dropped, delayed, changed or copied: netcond's own error (the client met a better link than
    /// the profile's for them), said with the run's summary. Zero unless a change broke
    /// ``PacketLinkDriver/passesAtOnce(_:)``.
    public var letGoTooSoon = 0
    /// Wire packets the kernel passed at once while the link held nothing back, a copy of each
    /// counted here afterwards (Docs/engines.md, "Passing in the kernel").
    public var passedInKernel = 0
    /// Packets the kernel passed whose copies netcond never read (its socket was full): the counts,
    /// the flow table and the radio miss them.
    public var passedUnseen = 0
    /// How late each packet's verdict was sent after the moment the link delivered it (one entry
    /// per packet let through; a packet let go at once is 0 late): netcond's own share of a
    /// latency's error, apart from the endpoints' (`GET /status`'s `timer_late_us_p50_p99_max`).
    public var lateness = LatenessHistogram()
    /// How many verdicts were sent 1 ms or more after their moment.
    public var lateOverMillisecond: Int { self.lateness.count(atLeast: .milliseconds(1)) }
    /// The latest a verdict was sent after its moment.
    public var maximumLateness: Span { self.lateness.maximum }
    public var elapsed = Span.zero
    /// Why the command's TCP sockets kept loopback's MSS (``PacketCage/pathMSSProblem``), or nil.
    public var pathMSSProblem: String?
    /// Why the packets the kernel passed at once were copied to netcond through log groups, not the
    /// ring (``PacketCage/ringProblem``), or nil.
    public var ringProblem: String?
    /// The link's state and the profile in force (live control can switch it).
    public var state = LinkState(phase: "")
    public var profile = ""
    /// The conditions in force when the summary was published (a schedule's phase, a live switch).
    public var conditions = LinkConditions()
    /// Each route's lane, in the order of the profile's `routes:` (empty: no routes). The fields
    /// above count every packet; a lane counts those of the connections on its route.
    public var lanes: [Lane] {
        zip(self.laneLabels, self.laneCounts).map { Lane(name: $0.name, match: $0.match, counts: $1) }
    }
    /// Each lane's route name and match: they change only when a profile switch adds a route.
    private var laneLabels: [LaneLabel] = []
    /// Each lane's counters, apart from its labels and holding no reference: the engine publishes a
    /// copy of the summary every 50 ms, and the next packet's count then copies this array whole —
    /// one copy of memory, where lanes holding strings took a retain and a release per route (with
    /// 1,000 routes, 0.9 µs more per packet; `scripts/bench --only 16b`).
    var laneCounts: [LaneCounts] = []

    /// Adds a lane for a route the summary had none for.
    mutating func addLane(name: String, match: String) {
        self.laneLabels.append(LaneLabel(name: name, match: match))
        self.laneCounts.append(LaneCounts())
    }

    private struct LaneLabel: Sendable, Equatable {
        var name: String
        var match: String
    }

    /// What crossed the link to one destination (a ``Route``): its packets, whatever path of the two
    /// (the access link, the route's own) dropped them, and its connections.
    public struct Lane: Sendable, Equatable {
        /// The route's name and its match, as a profile writes it.
        public var name: String
        public var match: String
        public var counts: LaneCounts
        public var up: Direction { self.counts.up }
        public var down: Direction { self.counts.down }
        public var connections: Int { self.counts.connections }
        public var refusedConnections: Int { self.counts.refusedConnections }
        public var connectionsCut: Int { self.counts.connectionsCut }
        public var firewallStopped: Int { self.counts.firewallStopped }
        public var connectsHeld: Int { self.counts.connectsHeld }
    }

    /// A lane's counters. As the summary's: offered, delivered bytes, and drops by cause, on either
    /// path; its connections.
    public struct LaneCounts: Sendable, Equatable {
        public var up = Direction()
        public var down = Direction()
        public var connections = 0
        public var refusedConnections = 0
        public var connectionsCut = 0
        public var firewallStopped = 0
        public var connectsHeld = 0

        /// A direction by index: 0 up, 1 down (as the summary's `directions`), changed in place.
        subscript(index: Int) -> Direction {
            get { index == 0 ? self.up : self.down }
            _modify {
                if index == 0 { yield &self.up } else { yield &self.down }
            }
        }
    }

    /// One direction's rate, delay and loss in force at the summary's moment (a trace's or a step
    /// series' value then), with the outage or stall.
    public func moment(_ direction: NetcondCore.Direction) -> LinkMoment {
        var moment = self.conditions.direction(direction).moment(at: Instant(nanoseconds: self.elapsed.nanoseconds))
        moment.outage = self.state.outage
        moment.stalled = self.state.stalled.contains(direction)
        return moment
    }
}

/// A change to the running packet link (`netcond ctl`, the control API).
public enum PacketCommand: Sendable {
    case switchProfile(Profile)
    case outage(OutageBehaviour?)
    case stall(StallDirection?)
    /// Reset every TCP connection on the link, once.
    case cut
    /// An outage on one route (nil ends it), a stall of one route, new conditions for one route's
    /// link (its link, schedule and stalls: the profile's). `route`: its index in the profile's
    /// paths, as ``PacketSummary/lanes`` lists them (``PacketEngine/route(named:)``); an index out of range changes nothing.
    case routeOutage(route: Int, OutageBehaviour?)
    case routeStall(route: Int, StallDirection?)
    case switchRoute(route: Int, Profile)
    /// The device leaves its network for another: every TCP connection open now is stranded
    /// (nothing of it carried again, no reset), nothing is carried for `gap`, then the link is the
    /// profile's.
    case handover(Profile, gap: Span)
}
