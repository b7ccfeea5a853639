import NetcondCore
import NetcondPacket
import NetcondProxy

/// The control API (`netcond ctl`, `NETCOND_CONTROL`) for a run under the packet engine: the
/// same routes as in proxy mode for what a link does (status, profile, outage, stall, cut) and the
/// captive portal; what needs a proxy that reads HTTP (faults, the event log) is refused with the
/// reason.
public struct PacketControl: ControlTarget {
    let session: PacketSession
    var engine: PacketEngine { self.session.engine }

    public init(session: PacketSession) {
        self.session = session
    }

    public func controlAnswer(_ route: ControlAPI.Route) async -> (status: Int, json: [UInt8]) {
        let command: PacketCommand?
        switch route {
        case .status, .dashboard, .history:  // the dashboard page and the history are the control server's own
            command = nil
        case .faults, .events, .command(.addFault), .command(.removeFault), .command(.removeFaultsNamed):
            return Self.refused(
                "HTTP faults and the event log need a proxy that reads HTTP; this run uses --engine packet")
        case .command(.captive(let open)):
            guard self.session.portal.stateText != nil else {
                return Self.refused(
                    "the profile '\(self.engine.summary().profile)' has no captive portal; switch to one that does (e.g. captive-hotel) or add captive_portal: to yours"
                )
            }
            await self.session.portal.set(open: open)
            command = nil
        case .routes:
            return (200, ControlRoutes(routes: self.routeStatuses()).controlJSON())
        case .command(.route(let name, let change)):
            guard let found = self.engine.route(named: name) else {
                let rejection = ControlAPI.unknownRoute(name, among: self.engine.routeNames)
                return (rejection.status, ControlError(error: rejection.message).controlJSON())
            }
            command = Self.command(change, path: found.path, route: found.route)
        case .command(.cut(.close)):
            return Self.refused(
                "the packet engine cuts connections with resets only (a close needs the proxy's side of the connection); allowed: {\"mode\": \"reset\"}"
            )
        case .command(.cut(.reset)):
            command = .cut
        case .command(.outage(let outage)):
            command = .outage(outage)
        case .command(.stall(let stall)):
            command = .stall(stall)
        case .command(.switchProfile(let profile)), .command(.handover(let profile, _)):
            let unsupported = PacketEngine.unsupportedFeatures(profile)
            guard unsupported.isEmpty else {
                return Self.refused(
                    "profile \(profile.name) uses " + unsupported.joined(separator: ", ")
                        + ", which the packet engine does not emulate yet")
            }
            if let problem = PacketSession.addressingProblem(run: self.session.profile, switchingTo: profile) {
                return Self.refused(problem)
            }
            if case .command(.handover(_, let gap)) = route {
                command = .handover(profile, gap: gap)
            } else {
                command = .switchProfile(profile)
            }
            // A handover's gap carries nothing: the session's side (hosts file, portal, origin) may
            // change at its start.
            await self.session.switched(to: profile)
        }
        let summary = await self.engine.control(command)
        var status = Self.status(summary, seed: self.engine.seed)
        status.captivePortal = self.session.portal.stateText
        return (200, status.controlJSON())
    }

    /// A route's live change as the engine takes it (`path`: the route's path index).
    static func command(_ change: RouteChange, path: Int, route: Route) -> PacketCommand {
        switch change {
        case .outage(let outage): return .routeOutage(route: path, outage)
        case .stall(let stall): return .routeStall(route: path, stall)
        case .link(let profile): return .switchRoute(route: path, route.withLink(of: profile))
        }
    }

    /// Each route in force with its link now and its connections (the engine's lanes).
    func routeStatuses() -> [ControlRoute] {
        let lanes = self.engine.summary().lanes
        return self.engine.routeViews().map { path, view in
            // Attempts the route refused are connections that took it too, as the stream engine counts them.
            let lane = path < lanes.count ? lanes[path] : nil
            var status = ControlRoute(view, connections: (lane?.connections ?? 0) + (lane?.refusedConnections ?? 0))
            status.bytesDown = lane?.down.bytes ?? 0
            status.bytesUp = lane?.up.bytes ?? 0
            return status
        }
    }

    static func refused(_ message: String) -> (status: Int, json: [UInt8]) {
        (400, ControlError(error: message).controlJSON())
    }

    /// The status in the control API's shape (segments are the link's packets here).
    static func status(_ summary: PacketSummary, seed: UInt64) -> ControlStatus {
        var status = ControlStatus(
            profile: summary.profile,
            phase: summary.state.phase,
            outage: summary.state.outage?.rawValue,
            stalled: summary.state.stalled.map(\.rawValue),
            seed: seed,
            elapsedSeconds: summary.elapsed.seconds,
            connectionsTotal: summary.connections,
            connectionsOpen: summary.connectionsOpen,
            bytesUp: summary.up.bytes,
            bytesDown: summary.down.bytes,
            bytesDelivered: summary.down.bytes,
            segmentsSent: summary.up.packets + summary.down.packets,
            segmentsLost: summary.up.lost + summary.down.lost,
            queueDrops: summary.up.queueDrops + summary.down.queueDrops,
            outageDrops: summary.up.outageDrops + summary.down.outageDrops,
            retransmissions: 0,
            resets: summary.connectionsCut,
            closes: 0,
            refusedConnections: summary.refusedConnections,
            upstreamFailures: 0,
            faults: 0,
            faultsApplied: 0,
            captivePortal: nil,
            timerWakeups: summary.lateness.count,
            timerLateUs: [summary.lateness.percentile(50), summary.lateness.percentile(99), summary.lateness.maximum]
                .map { Double($0.nanoseconds) / 1000 },
            engine: "packet",
            link: [Direction.down, .up].map { ControlLinkNow($0, summary.moment($0)) },
            linkBytesDown: summary.down.bytes,
            routes: summary.lanes.isEmpty ? nil : summary.lanes.count
        )
        status.directions = [Direction.down, .up].map { direction in
            let counts = direction == .down ? summary.down : summary.up
            return ControlDirectionCounters(
                direction: direction, packets: counts.packets, lost: counts.lost,
                queueDrops: counts.queueDrops + counts.aqmDrops, outageDrops: counts.outageDrops)
        }
        return status
    }
}
