import CNetcondPacket
import Foundation
import NetcondCore

#if canImport(Glibc)
import Glibc
#endif

/// Starting the packet engine: the privilege, the queues, the cage, the raw sockets, the thread;
/// and what a profile needs of the queues (whole packets, GSO packets whole).
extension PacketEngine {
    /// Checks the privilege, removes what a dead netcond left, binds the queues, makes the cage and
    /// starts the thread. Packets of the cage's processes cross the link from then on.
    public static func start(
        profile: Profile, seed: UInt64, capture: PacketCapture? = nil, precise: Bool = false,
        onStateChange: (@Sendable (LinkState, Span) -> Void)? = nil
    ) throws(PacketEngineError) -> PacketEngine {
        try PacketPrivilege.check()
        try Self.checkSupported(profile)
        PacketCage.removeStale()
        let queue = try NetfilterQueue()
        // From a random pair on: runs in PID namespaces of their own may all have the same PID.
        let start = UInt16(truncatingIfNeeded: 1000 + Int.random(in: 0..<30_000) * 2)
        // A capture needs whole packets, and the packets of the wire (GSO ones segmented). The
        // access link's conditions at the start, and each route's.
        let first =
            [(ConditionTimeline(profile: profile, seed: seed).conditions, profile.setup)]
            + profile.routes.map { ($0.timeline(seed: seed).conditions, $0.profile.setup) }
        // NAT64 translates whole packets, one segment at a time.
        let whole = capture != nil || profile.ipv6Only != nil || first.contains { Self.needsWholePackets($0.0, $0.1) }
        let copyRange = whole ? Self.wholePacket : Self.headOnly
        let up = try queue.bindPair(from: start, copyRange: copyRange)
        let wholeGSO = Direction.allCases.map { direction in
            capture == nil && profile.ipv6Only == nil
                && first.allSatisfy { Self.decidesNothingPerPacket($0.0.direction(direction)) }
        }
        for (whole, number) in zip(wholeGSO, [up, up &+ 1]) {
            try queue.setWholeGSO(whole, queue: number, waiting: true)
        }
        // Routes that match names read the DNS answers going down to the cage, whole.
        if !whole, profile.routes.contains(where: { !$0.match.hosts.isEmpty }) {
            let result = ncq_set_copy(queue.descriptor, up &+ 1, Self.wholePacket)
            guard result == 0 else { throw .system("cannot configure netfilter queue \(up &+ 1)", -result) }
        }
        // The kernel may pass packets itself while the link holds nothing back, copying them to
        // log groups of the same numbers (never with a capture or NAT64, which need every packet
        // in the engine's hands; nor when another program holds the groups).
        let passes = capture == nil && profile.ipv6Only == nil
        let logGroup = passes && queue.bindLogGroups(up, copyRange: copyRange) ? up : nil
        let wake = ncq_wake_open()
        guard wake >= 0 else { throw .system("cannot make an eventfd", -wake) }
        let cage: PacketCage
        do {
            cage = try PacketCage(
                queue: up, logGroup: logGroup, logCopyRange: copyRange, ipv6Only: profile.ipv6Only != nil)
        } catch {
            close(wake)
            throw error
        }
        // Resets go out marked as having crossed the link already: the cage's rules let them be.
        let raw4 = ncq_raw_open(4, cage.mark | PacketCage.passedBit)
        let raw6 = ncq_raw_open(6, cage.mark | PacketCage.passedBit)
        guard raw4 >= 0, raw6 >= 0 else {
            let code = raw4 < 0 ? -raw4 : -raw6
            if raw4 >= 0 { close(raw4) }
            if raw6 >= 0 { close(raw6) }
            close(wake)
            cage.remove()
            throw .system("cannot open a raw socket for resets", code)
        }
        let engine = PacketEngine(
            profile: profile, seed: seed, queue: queue, upQueue: up, cage: cage, wake: wake, wholeGSO: wholeGSO,
            raw: (raw4, raw6), capture: capture, precise: precise, onStateChange: onStateChange)
        let thread = Thread { engine.run() }
        thread.name = "netcond packet engine"
        thread.qualityOfService = .userInteractive
        engine.thread = thread
        thread.start()
        return engine
    }

    /// The profile features the packet engine does not do yet: refused before anything runs.
    public static func unsupportedFeatures(_ profile: Profile) -> [String] {
        var features: [String] = []
        if !profile.faults.isEmpty { features.append("HTTP faults (they need a proxy that reads HTTP)") }
        return features
    }

    static func checkSupported(_ profile: Profile) throws(PacketEngineError) {
        let features = Self.unsupportedFeatures(profile)
        guard features.isEmpty else {
            throw .unsupported(
                "profile \(profile.name) uses " + features.joined(separator: ", ")
                    + ", which the packet engine does not emulate yet")
        }
    }

    static func decidesNothingPerPacket(_ direction: LinkDirection) -> Bool {
        direction.bandwidth == nil && direction.trace == nil && direction.series == nil && direction.loss == .none
            && direction.jitter == .zero && direction.reorder == .zero
            && direction.duplicate == .zero && direction.corrupt == .zero && direction.connectionBandwidth == nil
    }

    /// Duplicates and corruption need each packet's bytes, not only its head; `dns_fail` a whole query.
    static func needsWholePackets(_ conditions: LinkConditions, _ setup: SetupRules) -> Bool {
        !setup.dnsFail.isEmpty
            || [conditions.up, conditions.down].contains { $0.duplicate > .zero || $0.corrupt > .zero }
    }

    static let headOnly: UInt32 = 128
    static let wholePacket: UInt32 = 65535
}
