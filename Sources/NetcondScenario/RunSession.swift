import Foundation
import NIOCore
import NetcondCore
import NetcondOrigin
import NetcondPacket
import NetcondProxy

/// What a scenario run needs of the machinery that carries the client's traffic: the proxy's
/// ``Session`` or the packet engine's ``PacketSession``. The runner drives either the same way.
protocol RunSession: Sendable {
    var origin: OriginServer { get }
    var evidenceEngine: RunEvidence.Engine { get }
    func childEnvironment(base: [String: String]) -> [String: String]
    func spawnClient(
        _ command: [String], environment: [String: String], workingDirectory: String,
        output: (stdout: Int32, stderr: Int32)
    ) throws(ChildProcessError) -> ChildProcess
    /// The folder the client works in, inside the run's working folder `workdir` (which netcond
    /// made and removes), and the reason when it could not be made.
    func clientFolder(in workdir: String) -> (path: String, problem: String?)
    /// Down bytes the link has delivered to the client so far.
    func deliveredBytes() async -> Int64
    /// The down direction's rate, delay and loss in force now (nil: the engine cannot say).
    func linkMoment() async -> LinkMoment?
    /// Each route in force as it stands now, in the profile's order (empty: none).
    func routeStatuses() async -> [ControlRoute]
    /// Applies a timeline action; returns a note when it changed nothing.
    func apply(_ action: ScenarioAction) async -> String?
    /// The phase (or outage) and the bytes delivered, for the live status line.
    func progress() async -> (phase: String, bytesDown: Int64)
    /// Ends what the client left running (where the engine can find it: the packet engine's cage)
    /// before the checks read the files it wrote.
    func endLeftovers() async
    /// Adds what the link recorded (with the origin's log) to the evidence.
    func addEvidence(to evidence: inout RunEvidence, clientStart: Int64) async
    func summaryText() async -> String
    func stop() async
}

extension Session: RunSession {
    var evidenceEngine: RunEvidence.Engine { .stream }

    func spawnClient(
        _ command: [String], environment: [String: String], workingDirectory: String,
        output: (stdout: Int32, stderr: Int32)
    ) throws(ChildProcessError) -> ChildProcess {
        try ChildProcess.spawn(command, environment: environment, workingDirectory: workingDirectory, output: output)
    }

    func clientFolder(in workdir: String) -> (path: String, problem: String?) {
        (workdir, nil)  // the proxy engine's client runs as netcond's own user
    }

    func deliveredBytes() async -> Int64 {
        (await self.proxy.status())?.bytesDelivered ?? 0
    }

    func linkMoment() async -> LinkMoment? {
        await self.proxy.linkMoment(.down)
    }

    func routeStatuses() async -> [ControlRoute] {
        await self.proxy.routeStatuses()
    }

    /// A process the client left behind outside its process group (setsid) is not in any cage the
    /// stream engine keeps: its process group was killed when the client ended.
    func endLeftovers() async {}

    func apply(_ action: ScenarioAction) async -> String? {
        // A removal by name can find nothing: triggers fire in their own order, and a profile
        // switch replaces every fault. Only then is the count before needed.
        var faultsBefore: Int?
        if case .removeFault = action { faultsBefore = await self.proxy.status()?.faults }
        let after = await self.proxy.apply(ScenarioRunner.command(for: action))
        if let faultsBefore, after?.faults == faultsBefore { return "none of that name was in force" }
        return nil
    }

    func progress() async -> (phase: String, bytesDown: Int64) {
        let status = await self.proxy.status()
        return (status.map { $0.outage.map { "outage (\($0))" } ?? $0.phase } ?? "", status?.bytesDown ?? 0)
    }

    func addEvidence(to evidence: inout RunEvidence, clientStart: Int64) async {
        evidence.sender = Session.senderText(self.profile)
        let log = await self.proxy.eventLog()
        EvidenceAssembler(clientStart: clientStart, logStart: Int64(log.startedAt.uptimeNanoseconds)).add(
            events: log.events, entries: self.origin.requestLog.entries,
            connections: self.origin.requestLog.connections, to: &evidence)
        if let radio = await self.proxy.radio() {
            evidence.radio = radioReport(
                radio.model, clockOrigin: Int64(radio.startedAt.uptimeNanoseconds), clientStart: clientStart,
                duration: evidence.radioWindow)
        }
    }
}

/// What `model` did from its start up to `end`, in one line (``RadioReport/summary``).
func radioSummary(_ model: RadioModel, upTo end: Instant) -> String {
    RadioReport(spec: model.spec, intervals: model.intervals(upTo: end), from: .zero, to: end).summary
}

/// What `model` (whose moments count from `clockOrigin`, uptime nanoseconds) did from the client's
/// start for `duration` seconds (``RunEvidence/radioWindow``): the radio's tail after the client's
/// last packet counts, whenever the client ended.
func radioReport(_ model: RadioModel, clockOrigin: Int64, clientStart: Int64, duration: Double) -> RadioReport {
    let from = Instant(nanoseconds: clientStart - clockOrigin)
    let to = from + Span.seconds(double: max(0, duration))
    return RadioReport(spec: model.spec, intervals: model.intervals(upTo: to), from: from, to: to)
}

extension PacketSession: RunSession {
    var evidenceEngine: RunEvidence.Engine { .packet }

    func spawnClient(
        _ command: [String], environment: [String: String], workingDirectory: String,
        output: (stdout: Int32, stderr: Int32)
    ) throws(ChildProcessError) -> ChildProcess {
        try self.spawn(command, environment: environment, workingDirectory: workingDirectory, output: output)
    }

    func deliveredBytes() async -> Int64 {
        self.summary().down.bytes
    }

    func linkMoment() async -> LinkMoment? {
        self.summary().moment(.down)
    }

    func routeStatuses() async -> [ControlRoute] {
        PacketControl(session: self).routeStatuses()
    }

    func apply(_ action: ScenarioAction) async -> String? {
        let command: PacketCommand
        switch action {
        case .switchProfile(let profile):
            command = .switchProfile(profile)
            await self.switched(to: profile)
        case .handover(let profile, let gap):
            command = .handover(profile, gap: gap)
            await self.switched(to: profile)  // nothing is carried in the gap: the session's side changes now
        case .outage(let outage): command = .outage(outage)
        case .stall(let stall): command = .stall(stall)
        case .cut(.reset): command = .cut
        case .captive(let open):
            await self.portal.set(open: open)
            return nil
        case .route(let name, let change):
            guard let found = self.engine.route(named: name) else { return "no route '\(name)' in force" }
            command = PacketControl.command(change, path: found.path, route: found.route)
        case .cut(.close), .addFault, .clearFaults, .removeFault:
            // Refused before the run (ScenarioRunner.packetProblems).
            return "the packet engine cannot do this"
        }
        _ = await self.engine.control(command)
        return nil
    }

    func progress() async -> (phase: String, bytesDown: Int64) {
        let summary = self.summary()
        return (summary.state.outage.map { "outage (\($0))" } ?? summary.state.phase, summary.down.bytes)
    }

    func addEvidence(to evidence: inout RunEvidence, clientStart: Int64) async {
        evidence.engine = .packet
        evidence.sender = self.sender.description
        let records = await self.engine.flowRecords()
        var origins: [[UInt8]: String] = [:]
        for (name, address) in [(Session.originHost, self.originAddress.ipAddress ?? "")]
            + self.naming.names.givenNames()
        {
            guard let bytes = ipAddressBytes(address) else { continue }
            origins[bytes] = name
            // An IPv6-only run's cage reaches it at its NAT64 address (from the same port).
            if let nat64 = self.profile.ipv6Only, bytes.count == 4 { origins[nat64.synthesized(bytes)] = name }
        }
        let assembled = PacketEvidence(
            clientStart: clientStart, engineStart: self.engine.clockOrigin, origins: origins)
        let deliveries = assembled.deliveries(records)
        let entries = self.origin.requestLog.entries
        let connections = self.origin.requestLog.connections
        let assembler = EvidenceAssembler(clientStart: clientStart, logStart: self.engine.clockOrigin)
        evidence.requests = assembler.requests(deliveries: deliveries, entries: entries, connections: connections)
        evidence.failedConnects =
            (assembled.failedConnects(records)
            + assembled.failedLookups(await self.engine.lookupFailures()) + self.ipv4Attempts(since: clientStart))
            .sorted { $0.at < $1.at }
        evidence.heldConnects = []
        evidence.portal = self.portal.events(clientStart: clientStart)
        evidence.bypasses = self.breaches().map { "at +\(Checks.seconds($0.at)) of the run, \($0.description)" }
        // Every connection the origin accepted crossed the link (the engine saw its SYN): one that
        // did not came from a process outside the cage, however it got there.
        let crossed = Set(records.filter { assembled.isOrigin($0) }.map { Int($0.cagePort) })
        let around = connections.filter {
            $0.openedAt.nanoseconds >= clientStart && !crossed.contains($0.peerPort ?? -1)
        }
        if !around.isEmpty {
            evidence.bypasses.append(
                "\(around.count) connection\(around.count == 1 ? "" : "s") reached the origin without crossing the link (from port\(around.count == 1 ? "" : "s") \(around.prefix(5).map { String($0.peerPort ?? 0) }.joined(separator: ", ")))"
            )
        }
        // After the flow records: reading them read every copy the kernel had passed on.
        evidence.shortfalls = packetShortfalls(self.summary())
        let engineStart = self.engine.clockOrigin
        if let radio = await self.engine.radio() {
            evidence.radio = radioReport(
                radio, clockOrigin: engineStart, clientStart: clientStart, duration: evidence.radioWindow)
        }
        evidence.linkEvents = self.stateChanges.withLockedValue { $0 }.map { change in
            RunEvidence.LinkEvent(
                at: Double(engineStart + change.at.nanoseconds - clientStart) / 1e9, kind: .link,
                detail: "link: \(change.state)")
        }
    }

    func summaryText() async -> String {
        packetSummaryText(profile: self.profile.name, seed: self.seed, self.summary(), sender: self.sender)
    }
}

/// The packet engine's flow records as scenario evidence: what of each connection to the origin
/// reached the client, and the attempts that never reached it.
struct PacketEvidence {
    /// The client's start and the engine's clock origin, in monotonic (uptime) nanoseconds.
    var clientStart: Int64
    var engineStart: Int64
    /// The addresses the origin listens on (its connections are told apart by them), each with
    /// the name that leads there: `origin.netcond.test`'s, and one per other name under
    /// `netcond.test` the command resolved.
    var origins: [[UInt8]: String]

    func isOrigin(_ record: PacketFlowRecord) -> Bool {
        record.fromCage && self.origins[record.farAddress] != nil && (record.farPort == 80 || record.farPort == 443)
    }

    func deliveries(_ records: [PacketFlowRecord]) -> [DeliveryEvidence.Delivery] {
        records.filter { self.isOrigin($0) && $0.established }.map { record in
            DeliveryEvidence.Delivery(
                at: Instant(nanoseconds: self.engineStart + record.startedAt.nanoseconds),
                localPort: Int(record.cagePort),
                bytes: record.farBytesDelivered,
                cut: record.cutByLink ? .reset : nil,
                clientFIN: record.cageFINAt.map { Instant(nanoseconds: self.engineStart + $0.nanoseconds) }
            )
        }
    }

    /// The origin's name failing to resolve (`dns_fail`): one attempt per lookup (a resolver's A
    /// and AAAA queries, and its retries within 100 ms, are one).
    func failedLookups(_ lookups: [PacketLookupFailure]) -> [RunEvidence.FailedConnect] {
        var attempts: [RunEvidence.FailedConnect] = []
        var last: Instant?
        for lookup in lookups where lookup.name == Session.originHost {
            defer { last = lookup.at }
            if let last, lookup.at - last < .milliseconds(100) { continue }
            attempts.append(
                RunEvidence.FailedConnect(
                    at: Double(self.engineStart + lookup.at.nanoseconds - self.clientStart) / 1e9,
                    host: Session.originHost, port: 0, outcome: .noSuchName))
        }
        return attempts
    }

    func failedConnects(_ records: [PacketFlowRecord]) -> [RunEvidence.FailedConnect] {
        records.filter { self.isOrigin($0) && !$0.established }.map { record in
            let outcome: AttemptOutcome =
                record.refused ? .refused : record.syns > 6 ? .timedOut : .unanswered
            return RunEvidence.FailedConnect(
                at: Double(self.engineStart + record.startedAt.nanoseconds - self.clientStart) / 1e9,
                host: self.origins[record.farAddress] ?? Session.originHost, port: Int(record.farPort),
                outcome: outcome)
        }
    }
}

/// `edge (packet engine): 3.2 s, up 616 B in 9 packets, down 20.7 KB in 17 packets, no packet lost (seed 5)`.
///
/// `idleDriver`: this machine's cpuidle driver, which decides whether `--low-latency` can help a run
/// whose packets left late.
public func packetSummaryText(
    profile: String, seed: UInt64, _ summary: PacketSummary, sender: SenderReport? = nil,
    idleDriver: CPUIdleDriver = .current()
) -> String {
    func direction(_ name: String, _ d: PacketSummary.Direction) -> String {
        "\(name) \(formatBytes(d.bytes)) in \(d.packets) packet\(d.packets == 1 ? "" : "s")"
    }
    var parts = [formatSeconds(summary.elapsed), direction("up", summary.up), direction("down", summary.down)]
    let lost = summary.up.lost + summary.down.lost
    let full = summary.up.queueDrops + summary.down.queueDrops
    let aqm = summary.up.aqmDrops + summary.down.aqmDrops
    let outage = summary.up.outageDrops + summary.down.outageDrops
    let total = lost + full + aqm + outage
    if total == 0 {
        parts.append("no packet lost")
    } else {
        var causes: [String] = []
        if full > 0 { causes.append("\(full) by the full queue") }
        if aqm > 0 { causes.append("\(aqm) by CoDel") }
        if outage > 0 { causes.append("\(outage) in outages") }
        var text = "\(total) packet\(total == 1 ? "" : "s") lost"
        if !causes.isEmpty { text += " (" + causes.joined(separator: ", ") + ")" }
        parts.append(text)
    }
    parts += packetEvents(summary)
    parts += packetWarnings(summary, idleDriver: idleDriver)
    if let sender { parts.append(sender.description) }
    return "\(profile) (packet engine): " + parts.joined(separator: ", ") + " (seed \(seed))"
}

/// What the packet engine did to connections and packets besides losing them: cuts, refusals,
/// the firewall, held connects, failed lookups, copies and corruption.
private func packetEvents(_ summary: PacketSummary) -> [String] {
    var parts: [String] = []
    if summary.connectionsCut > 0 {
        parts.append("\(summary.connectionsCut) connection\(summary.connectionsCut == 1 ? "" : "s") cut by the link")
    }
    if summary.refusedConnections > 0 {
        parts.append("\(summary.refusedConnections) connection\(summary.refusedConnections == 1 ? "" : "s") refused")
    }
    if summary.firewallStopped > 0 {
        parts.append(
            "\(summary.firewallStopped) packet\(summary.firewallStopped == 1 ? "" : "s") stopped by the firewall")
    }
    if summary.connectsHeld > 0 {
        parts.append("\(summary.connectsHeld) connection\(summary.connectsHeld == 1 ? "" : "s") held (connect_hold)")
    }
    if summary.lookupsFailed > 0 {
        parts.append(
            "\(summary.lookupsFailed) DNS quer\(summary.lookupsFailed == 1 ? "y" : "ies") answered no such name (dns_fail)"
        )
    }
    if summary.passedInKernel > 0 {
        parts.append(
            "\(summary.passedInKernel) packet\(summary.passedInKernel == 1 ? "" : "s") passed at once by the kernel "
                + "while the link held nothing back")
    }
    let duplicated = summary.up.duplicated + summary.down.duplicated
    if duplicated > 0 { parts.append("\(duplicated) packet\(duplicated == 1 ? "" : "s") duplicated") }
    let corrupted = summary.up.corrupted + summary.down.corrupted
    if corrupted > 0 {
        parts.append(
            "\(corrupted) packet\(corrupted == 1 ? "" : "s") corrupted (their receiver's checksum discards them)")
    }
    if summary.copiesNotSent > 0 {
        parts.append("\(summary.copiesNotSent) duplicate\(summary.copiesNotSent == 1 ? "" : "s") could not be sent")
    }
    if summary.portalStopped > 0 {
        parts.append(
            "\(summary.portalStopped) packet\(summary.portalStopped == 1 ? "" : "s") stopped by the closed captive portal"
        )
    }
    if summary.resetsNotSent > 0 {
        parts.append("\(summary.resetsNotSent) reset\(summary.resetsNotSent == 1 ? "" : "s") could not be sent")
    }
    if summary.untranslated > 0 {
        parts.append(
            "\(summary.untranslated) packet\(summary.untranslated == 1 ? "" : "s") the NAT64 does not translate "
                + "(an IPv4 fragment, an ICMP error, an IPv6 extension header), dropped")
    }
    return parts
}

/// Where the link fell short of the profile, for the verdicts (``RunEvidence/shortfalls``): the
/// counts of ``packetWarnings(_:idleDriver:)`` that change what the client met or what netcond saw of it.
/// Lateness is not one: each verdict that rests on timing allows for a loaded machine.
func packetShortfalls(_ summary: PacketSummary) -> [String] {
    func packets(_ count: Int) -> String { "\(count) packet\(count == 1 ? "" : "s")" }
    var parts: [String] = []
    if summary.vanished > 0 {
        parts.append(
            "\(packets(summary.vanished)) dropped by the kernel while netcond held them (the client met more loss)")
    }
    if summary.kernelDrops > 0 {
        parts.append(
            "the kernel dropped packets netcond could not read in time, \(summary.kernelDrops) time\(summary.kernelDrops == 1 ? "" : "s") (the client met more loss)"
        )
    }
    if summary.letGoTooSoon > 0 {
        parts.append("\(packets(summary.letGoTooSoon)) let go before the link decided (the client met a better link)")
    }
    if summary.passedUnseen > 0 {
        parts.append(
            "\(packets(summary.passedUnseen)) the kernel passed that netcond never saw (the evidence misses them)")
    }
    return parts
}

/// What went wrong outside the emulated link, which the summary must not hide.
private func packetWarnings(_ summary: PacketSummary, idleDriver: CPUIdleDriver) -> [String] {
    var parts: [String] = []
    if summary.vanished > 0 {
        parts.append(
            "\(summary.vanished) packet\(summary.vanished == 1 ? " was" : "s were") dropped by the kernel while "
                + "netcond held them, outside the emulated link (a program changed the firewall meanwhile, which flushes every "
                + "NFQUEUE): the client saw more loss than the profile's")
    }
    if summary.kernelDrops > 0 {
        parts.append(
            "netcond could not keep up \(summary.kernelDrops) time\(summary.kernelDrops == 1 ? "" : "s"): "
                + "the kernel dropped packets that were waiting for it (the machine is overloaded)")
    }
    if let problem = summary.pathMSSProblem {
        parts.append(
            "the command's TCP sockets kept loopback's 64 KB MSS (\(problem)): downloads from servers on this host "
                + "open their receive window later than on a real 1,500-byte path")
    }
    if let problem = summary.ringProblem {
        parts.append(
            "the kernel refused netcond's ring for the copies of the packets it passes (\(problem)): they came "
                + "through log groups instead, which costs the machine more time per packet (the link is the same)")
    }
    if summary.passedUnseen > 0 {
        parts.append(
            "netcond did not see \(summary.passedUnseen) packet\(summary.passedUnseen == 1 ? "" : "s") the kernel "
                + "passed while the link held nothing back (their copies did not fit its socket): the counts and "
                + "the evidence miss them")
    }
    if summary.letGoTooSoon > 0 {
        parts.append(
            "\(summary.letGoTooSoon) packet\(summary.letGoTooSoon == 1 ? " was" : "s were") let go at once, as the "
                + "link passed everything then, and the link then held, dropped or changed \(summary.letGoTooSoon == 1 ? "it" : "them"): "
                + "netcond's own error, the client met a better link than the profile's (please report it)")
    }
    if summary.lateOverMillisecond > 0 {
        parts.append(
            "\(summary.lateOverMillisecond) packet\(summary.lateOverMillisecond == 1 ? " was" : "s were") "
                + "released over 1 ms late (longest \(summary.maximumLateness.nanoseconds / 1_000_000) ms): "
                + "netcond's thread woke late ("
                + (idleDriver == .none
                    ? "a busy machine, or idle CPUs halting: this machine has no cpuidle driver, so --low-latency "
                        + "cannot keep them polling) "
                    : "a busy machine, or a virtual machine's idle CPUs: --low-latency helps) ")
                + "and the link's timing was off by as much")
    }
    return parts
}

/// Which TCP sender a packet-engine run's servers used. The built-in origin's sockets are given the
/// profile's `tcp:` (the sender the stream engine models); another server sends with its own
/// choice, which netcond cannot see from outside it (on this host, most use the host's default).
public struct SenderReport: Sendable, Equatable, CustomStringConvertible {
    /// The profile's `tcp:`.
    public var wanted: String
    /// What the kernel says the origin's connections are born with (nil: it could not be read).
    public var origin: String?
    /// `net.ipv4.tcp_congestion_control`.
    public var hostDefault: String?

    public init(wanted: String, origin: String?, hostDefault: String?) {
        self.wanted = wanted
        self.origin = origin
        self.hostDefault = hostDefault
    }

    /// `the origin sends with cubic (the profile's tcp), other servers with their own (this host's default: bbr)`.
    public var description: String {
        var text: String
        switch self.origin {
        case self.wanted?: text = "the origin sends with \(self.wanted) (the profile's tcp)"
        case let other?:
            text = "the origin sends with \(other), not the profile's \(self.wanted) (this kernel does not offer it)"
        case nil: text = "the origin's sender is unknown (the profile's tcp is \(self.wanted))"
        }
        text += ", other servers with their own"
        if let host = self.hostDefault { text += " (this host's default: \(host))" }
        return text
    }
}

/// The bytes of an IPv4 or IPv6 address written as text, or nil.
func ipAddressBytes(_ text: String) -> [UInt8]? {
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
    return nil
}

#if canImport(Glibc)
import Glibc
#endif
