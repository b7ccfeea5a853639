import NIOCore
import NetcondCore

/// The run's HTTP faults and its event log, on the proxy's event loop: handlers ask it which
/// fault hits a request; every hit and every change of the link's state is recorded with its
/// time since the start, for `GET /events` (and, later, the scenario checks).
final class FaultBook {
    private(set) var plan: FaultPlan
    private(set) var events: [ProxyEvent] = []
    /// Events not kept because the log was full.
    private(set) var eventsDropped = 0
    var startedAt: NIODeadline

    static let maxEvents = 100_000

    init(faults: [HTTPFault], seed: UInt64, startedAt: NIODeadline) {
        self.plan = FaultPlan(faults: faults, seed: seed)
        self.startedAt = startedAt
    }

    func elapsed(at now: NIODeadline) -> Span {
        Span(nanoseconds: Int64(now.uptimeNanoseconds) - Int64(self.startedAt.uptimeNanoseconds))
    }

    /// The fault that hits this request, if any (recorded).
    func decide(_ request: FaultRequest, now: NIODeadline) -> HTTPFaultAction? {
        guard !self.plan.isEmpty else { return nil }
        let elapsed = self.elapsed(at: now)
        guard let hit = self.plan.decide(request, at: elapsed) else { return nil }
        self.record(
            ProxyEvent(
                at: elapsed.seconds,
                kind: "fault",
                detail: "fault \(hit.id) (\(hit.fault.label)): \(request.method) http://\(request.host)\(request.path)",
                fault: hit.id,
                method: request.method,
                host: request.host,
                path: request.path
            )
        )
        return hit.fault.action
    }

    func add(_ fault: HTTPFault) -> Int { self.plan.add(fault) }
    func remove(id: Int) -> Bool { self.plan.remove(id: id) }
    func removeAll() { self.plan.removeAll() }
    func replace(with faults: [HTTPFault]) { self.plan.replace(with: faults) }

    func record(_ event: ProxyEvent) {
        guard self.events.count < Self.maxEvents else {
            self.eventsDropped += 1
            return
        }
        self.events.append(event)
    }
}

/// One line of a run's event log.
public struct ProxyEvent: Codable, Equatable, Sendable {
    /// Seconds since the run started.
    public var at: Double
    /// `fault` (a fault hit a request) or `link` (the link's state changed).
    public var kind: String
    public var detail: String
    public var fault: Int?
    public var method: String?
    public var host: String?
    public var path: String?

    public init(
        at: Double, kind: String, detail: String, fault: Int? = nil, method: String? = nil, host: String? = nil,
        path: String? = nil
    ) {
        self.at = at
        self.kind = kind
        self.detail = detail
        self.fault = fault
        self.method = method
        self.host = host
        self.path = path
    }
}
