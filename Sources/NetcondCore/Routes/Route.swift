/// The path beyond the access link to some destinations: a link of its own (rate, queue, loss,
/// delay, a trace), its outages, schedule and stalls, its faults and its set-up rules, in series
/// with the access link every connection shares.
///
/// ```
///  client ─▶ access link (the profile's: the phone's radio) ─▶ route's link (cdn.netcond.test) ─▶ server
///                                                          └─▶ no route matched: straight to the server
/// ```
/// A route is written as a profile's `routes:` entry: `match:` and the keys of a profile that
/// belong to one destination (see ``RouteDecoding``).
public struct Route: Sendable, Equatable {
    /// How `netcond ctl`, the control API and reports name it: its `name:`, else its first host,
    /// else its match.
    public var name: String
    public var match: RouteMatch
    /// The route's own conditions as a profile holds them: `up`, `down`, the set-up delays,
    /// `schedule`, `stalls`, `faults` and `setup` (its other fields are unused).
    public var profile: Profile
    /// An outage in force from the start (`outage: blackhole`); nil: none but its schedule's.
    public var outage: OutageBehaviour?

    public init(name: String, match: RouteMatch, profile: Profile, outage: OutageBehaviour? = nil) {
        self.name = name
        self.match = match
        self.profile = profile
        self.outage = outage
    }

    /// The route's timeline at the start of a run: its schedule, its stalls, its standing outage.
    /// `now`: when it starts (a route a profile switch adds starts its schedule then).
    public func timeline(seed: UInt64, at now: Instant = .zero) -> ConditionTimeline {
        var timeline = ConditionTimeline(profile: self.profile, seed: seed, at: now)
        if let outage = self.outage { timeline.setOutage(outage, at: now) }
        return timeline
    }
}

extension SeedDeriver {
    /// The seed of route `index`'s paths and timeline under run seed `run`: each route draws from
    /// streams of its own, so adding a route changes no other route's (or the access link's) fates.
    public static func route(_ run: UInt64, _ index: Int) -> UInt64 {
        Self.derive(run, 0x524F_5554, UInt64(index))
    }
}

/// A profile's routes, ordered, with indexes so that finding a connection's route stays cheap with
/// many of them: exact names and `*.suffix` globs by dictionary, address blocks by prefix length;
/// only the few candidates these give (and routes no index holds) are checked, in order, and the
/// first whose whole match holds wins.
public struct RouteTable: Sendable {
    public let routes: [Route]
    private var exactHosts: [String: [Int]] = [:]
    private var hostSuffixes: [String: [Int]] = [:]
    /// Per address length and prefix: the masked address → routes.
    private var blocks: [BlockKey: [[UInt8]: [Int]]] = [:]
    private var blockKeys: [BlockKey] = []
    /// Routes no index holds (a glob other than `*.suffix`, or neither host nor address): checked always.
    private var unindexed: [Int] = []

    private struct BlockKey: Hashable {
        var length: Int
        var prefix: Int
    }

    public init(_ routes: [Route]) {
        self.routes = routes
        for (index, route) in routes.enumerated() {
            let match = route.match
            if !match.hosts.isEmpty, match.hosts.allSatisfy({ Self.hostKey($0) != nil }) {
                for host in match.hosts {
                    switch Self.hostKey(host)! {
                    case .exact(let name): self.exactHosts[name, default: []].append(index)
                    case .suffix(let suffix): self.hostSuffixes[suffix, default: []].append(index)
                    }
                }
            } else if match.hosts.isEmpty, !match.addresses.isEmpty {
                for block in match.addresses {
                    let key = BlockKey(length: block.base.count, prefix: block.prefix)
                    if self.blocks[key] == nil { self.blockKeys.append(key) }
                    self.blocks[key, default: [:]][block.base, default: []].append(index)
                }
            } else {
                self.unindexed.append(index)
            }
        }
    }

    public var isEmpty: Bool { self.routes.isEmpty }

    private enum HostKey {
        case exact(String)
        /// `*.example.com` → `.example.com`.
        case suffix(String)
    }

    private static func hostKey(_ pattern: String) -> HostKey? {
        if !pattern.contains("*") { return .exact(pattern) }
        let rest = pattern.dropFirst(2)
        if pattern.hasPrefix("*."), !rest.isEmpty, !rest.contains("*") { return .suffix(String(pattern.dropFirst())) }
        return nil
    }

    /// The index of the first route whose match holds for `target` (nil: none; the connection
    /// meets the access link alone).
    public func route(for target: RouteTarget) -> Int? {
        guard !self.routes.isEmpty else { return nil }
        var candidates = self.unindexed
        if let host = target.host?.lowercased() { candidates += self.indexed(host: host) }
        if let address = target.address {
            for key in self.blockKeys where key.length == address.count {
                if let hits = self.blocks[key]?[AddressBlock.masked(address, prefix: key.prefix)] { candidates += hits }
            }
        }
        var best: Int?
        for index in candidates where best.map({ index < $0 }) ?? true {
            if self.routes[index].match.matches(target) { best = index }
        }
        return best
    }

    /// The index of the first route whose `host` patterns name `name`, whatever its other keys say
    /// (a look-up has no port yet): the route whose `dns_delay` a look-up of `name` meets. Routes
    /// that match addresses alone name no host.
    public func route(lookingUp name: String) -> Int? {
        guard !self.routes.isEmpty else { return nil }
        let host = name.lowercased()
        let candidates = (self.unindexed + self.indexed(host: host)).sorted()
        return candidates.first { self.routes[$0].match.hosts.contains { Glob.matches($0, host) } }
    }

    /// The routes the host indexes hold for `host` (lower case): its exact name, its suffixes.
    private func indexed(host: String) -> [Int] {
        var found = self.exactHosts[host] ?? []
        guard !self.hostSuffixes.isEmpty else { return found }
        var index = host.startIndex
        while let dot = host[index...].firstIndex(of: ".") {
            if let hits = self.hostSuffixes[String(host[dot...])] { found += hits }
            index = host.index(after: dot)
        }
        return found
    }
}

/// A live change to one route (`netcond ctl route`, `POST /routes/NAME`, a scenario timeline's
/// `route:` event).
public enum RouteChange: Sendable, Equatable, CustomStringConvertible {
    /// Start an outage on the route, or end its live one (nil).
    case outage(OutageBehaviour?)
    /// Stall the route, or end its live stall (nil).
    case stall(StallDirection?)
    /// The route's link becomes `profile`'s (its directions, set-up delays, schedule and stalls);
    /// the route keeps its match, faults and set-up rules.
    case link(Profile)

    public var description: String {
        switch self {
        case .outage(let outage): return outage.map { "outage (\($0))" } ?? "outage ends"
        case .stall(let stall): return stall.map { "stall (\($0))" } ?? "stall ends"
        case .link(let profile): return "link → \(profile.name)"
        }
    }
}

extension Route {
    /// The route's own profile with `profile`'s link in place of its own (see ``RouteChange/link(_:)``).
    public func withLink(of profile: Profile) -> Profile {
        var own = self.profile
        own.conditions = profile.conditions
        own.schedule = profile.schedule
        own.stalls = profile.stalls
        own.name = profile.name
        return own
    }
}
