import NetcondCore
import NetcondOrigin
import NetcondProxy

/// Turns what the proxy and the origin recorded into the evidence the checks judge: a pure
/// function of typed values (no clock, no I/O), so each rule is testable on hand-made logs.
///
/// Times: the origin stamps requests on the uptime clock, the proxy's event log counts seconds
/// from its own start; evidence counts seconds from the client's start.
struct EvidenceAssembler {
    /// The client's start and the proxy log's start, in uptime nanoseconds.
    var clientStart: Int64
    var logStart: Int64

    /// Adds the origin's requests (with what of each reached the client), the attempts that never
    /// reached the origin, and the portal's doings.
    func add(
        events: [ProxyEvent], entries: [OriginRequestLog.Entry], connections: [OriginRequestLog.Connection],
        to evidence: inout RunEvidence
    ) {
        evidence.requests = self.requests(events: events, entries: entries, connections: connections)
        evidence.failedConnects = self.failedConnects(events)
        evidence.heldConnects = self.heldConnects(events)
        evidence.portal = self.portal(events)
        evidence.linkEvents = events.compactMap { event in
            guard let kind = RunEvidence.LinkEvent.Kind(event.kind) else { return nil }
            return RunEvidence.LinkEvent(at: self.seconds(logged: event.at), kind: kind, detail: event.detail)
        }
    }

    private func seconds(uptime nanoseconds: Int64) -> Double {
        Double(nanoseconds - self.clientStart) / 1e9
    }

    private func seconds(logged at: Double) -> Double {
        at + Double(self.logStart - self.clientStart) / 1e9
    }

    func requests(
        events: [ProxyEvent], entries: [OriginRequestLog.Entry], connections: [OriginRequestLog.Connection]
    ) -> [RunEvidence.Request] {
        let deliveries = events.compactMap { event -> DeliveryEvidence.Delivery? in
            guard event.kind == .delivered, let port = event.localPort, let bytes = event.bytes,
                let connectedAt = event.connectedAt
            else { return nil }
            let at = Instant(nanoseconds: self.logStart + Int64(connectedAt * 1e9))
            let fin = event.clientFINAt.map { Instant(nanoseconds: self.logStart + Int64($0 * 1e9)) }
            var delivery = DeliveryEvidence.Delivery(
                at: at, localPort: port, bytes: bytes, cut: event.cut, clientFIN: fin)
            delivery.stillOpen = event.stillOpen
            delivery.samples = event.deliveries.map {
                DeliveryEvidence.Delivery.Sample(
                    at: Instant(nanoseconds: self.logStart + Int64($0.at * 1e9)), bytes: $0.bytes)
            }
            return delivery
        }
        return self.requests(deliveries: deliveries, entries: entries, connections: connections)
    }

    /// The origin's requests, with what of each reached the client by `deliveries` (the proxy's
    /// `delivered` events, or the packet engine's flow records).
    func requests(
        deliveries: [DeliveryEvidence.Delivery], entries: [OriginRequestLog.Entry],
        connections: [OriginRequestLog.Connection]
    ) -> [RunEvidence.Request] {
        let undelivered = DeliveryEvidence.undelivered(
            entries: entries, connections: connections, deliveries: deliveries)
        let late = DeliveryEvidence.afterClientFIN(entries: entries, connections: connections, deliveries: deliveries)
        let received = DeliveryEvidence.received(entries: entries, connections: connections, deliveries: deliveries)
        return entries.map { entry in
            var request = RunEvidence.Request(
                at: self.seconds(uptime: entry.timestamp.nanoseconds),
                method: entry.method,
                path: entry.path,
                range: entry.headers.range,
                idempotencyKey: entry.headers.idempotencyKey,
                status: entry.status,
                retryAfter: entry.retryAfter,
                bodyBytesSent: entry.bodyBytesSent,
                completed: entry.completed,
                ended: entry.finishedAt.map { self.seconds(uptime: $0.nanoseconds) },
                effect: entry.effect
            )
            request.host = entry.host
            request.condition =
                entry.headers.ifNoneMatch.map { "If-None-Match: \($0)" }
                ?? entry.headers.ifModifiedSince.map { "If-Modified-Since: \($0)" }
            request.responded = entry.respondedAt.map { self.seconds(uptime: $0.nanoseconds) }
            request.originFault = entry.fault
            request.afterClientFIN = late[entry.id].map { Double($0.nanoseconds) / 1e9 }
            // Never before the origin finished (a pass-through link can deliver before the origin's
            // own completion is stamped).
            request.received = received[entry.id].map { max(self.seconds(uptime: $0.nanoseconds), request.ended ?? 0) }
            if let lost = undelivered[entry.id] {
                request.undelivered = lost.bytes
                request.undeliveredUncertainty = lost.uncertainty
                request.linkCut = lost.cut
                request.stoppedByRunEnd = lost.byRunEnd
            }
            return request
        }
    }

    /// Attempts that never reached the origin: connections to it (by any name under
    /// `netcond.test`) that failed, and client connections whose request the link swallowed (no
    /// host known: nothing was read).
    func failedConnects(_ events: [ProxyEvent]) -> [RunEvidence.FailedConnect] {
        events.compactMap { event in
            guard let outcome = event.attempt else { return nil }
            switch event.kind {
            case .connect:
                guard let host = event.host, OriginHost.isOwn(host) else { return nil }
                return RunEvidence.FailedConnect(
                    at: self.seconds(logged: event.at), host: host, port: event.port ?? 0, outcome: outcome)
            case .client:
                return RunEvidence.FailedConnect(
                    at: self.seconds(logged: event.at), host: "", port: 0, outcome: outcome)
            default:
                return nil
            }
        }
    }

    /// Connections to the origin made only after the link held them (see ``RunEvidence/HeldConnect``).
    func heldConnects(_ events: [ProxyEvent]) -> [RunEvidence.HeldConnect] {
        events.compactMap { event in
            guard event.kind == .held, let held = event.heldFor, let host = event.host, OriginHost.isOwn(host)
            else { return nil }
            return RunEvidence.HeldConnect(at: self.seconds(logged: event.at), heldFor: held)
        }
    }

    func portal(_ events: [ProxyEvent]) -> [RunEvidence.PortalEvent] {
        events.compactMap { event in
            guard event.kind == .captive, let action = event.portal else { return nil }
            return RunEvidence.PortalEvent(at: self.seconds(logged: event.at), kind: action, detail: event.detail)
        }
    }
}

extension RunEvidence.LinkEvent.Kind {
    /// The moments of the proxy's event log the report's timeline draws (nil for the others).
    init?(_ kind: ProxyEvent.Kind) {
        switch kind {
        case .link: self = .link
        case .fault: self = .fault
        case .captive: self = .captive
        default: return nil
        }
    }
}
