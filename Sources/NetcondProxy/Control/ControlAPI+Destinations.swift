import Foundation
import NetcondCore

/// The routes beyond the access link, over the control API (both engines):
///
/// ```
///  GET  /routes                                   every route in force, with its link now
///  POST /routes/NAME  {"outage": "blackhole"}     blackhole | refuse | reset; {"outage": "end"}
///                     {"stall": "down"}           up | down | both; {"stall": "end"}
///                     {"profile": "3g"}           the route's link becomes a built-in profile's
/// ```
extension ControlAPI {
    /// `/routes` and `/routes/NAME`, or nil for another path.
    static func destinations(method: String, path: String, body: [UInt8]) -> Result<Route, Rejection>? {
        let wrongMethod = { (allowed: String) in Self.wrongMethod(method, path, allowed: allowed) }
        if path == "/routes" {
            return method == "GET" ? .success(.routes) : wrongMethod("GET")
        }
        guard path.hasPrefix("/routes/") else { return nil }
        guard method == "POST" else { return wrongMethod("POST") }
        let encoded = String(path.dropFirst("/routes/".count))
        guard let name = encoded.removingPercentEncoding, !name.isEmpty else {
            return .failure(
                Rejection(status: 404, message: "which route? allowed: /routes/NAME (GET /routes lists them)"))
        }
        let example = #"{"outage": "blackhole"}, {"stall": "down"} or {"profile": "3g"}"#
        return Self.object(body, example: example).flatMap { object in
            guard object.count == 1, let (key, value) = object.first else {
                return .failure(Rejection(status: 400, message: "one change at a time; allowed: \(example)"))
            }
            return Self.routeChange(key: key, value: value).map { .command(.route(name, $0)) }
        }
    }

    private static func routeChange(key: String, value: Any) -> Result<RouteChange, Rejection> {
        switch key {
        case "outage":
            return Self.word(value, key: "outage", among: OutageBehaviour.allCases.map(\.rawValue) + ["end"]).map {
                .outage(OutageBehaviour(rawValue: $0))
            }
        case "stall":
            return Self.word(value, key: "stall", among: StallDirection.allCases.map(\.rawValue) + ["end"]).map {
                .stall(StallDirection(rawValue: $0))
            }
        case "profile":
            guard let name = value as? String else {
                return .failure(Rejection(status: 400, message: "'profile' must be a built-in profile's name, e.g. 3g"))
            }
            guard !ProfileCatalog.looksLikePath(name) else {
                return .failure(Rejection(status: 400, message: "'\(name)' is a path; \(Self.pathsRefused)"))
            }
            do {
                return .success(.link(try ProfileCatalog.resolve(name)))
            } catch {
                return .failure(Rejection(status: 400, message: "\(error)"))
            }
        default:
            return .failure(
                Rejection(
                    status: 400, message: "unknown key '\(key)'; allowed: outage, stall or profile, one at a time"))
        }
    }

    /// Why a change names a route the run does not have.
    public static func unknownRoute(_ name: String, among routes: [String]) -> Rejection {
        Rejection(
            status: 404,
            message: routes.isEmpty
                ? "no route '\(name)': this run's profile has no routes: (add them to the profile)"
                : Suggestion.unknown("route", name, among: routes, listedAs: "routes"))
    }
}

/// One route in force, as `GET /routes` and `/status` list it.
public struct ControlRoute: Codable, Equatable, Sendable {
    public var name: String
    /// What it matches, as a profile writes it (`host cdn.example.com, port 443`).
    public var match: String
    /// The link it is on now: its profile's name, or its schedule phase's.
    public var phase: String
    public var outage: String?
    public var stalled: [String]
    /// Each direction's rate, delay and loss in force on the route's own link (down first).
    public var link: [ControlLinkNow]
    /// Connections that took it so far (the stream engine counts connections; the packet engine
    /// counts flows it saw).
    public var connections: Int
    /// Bytes its connections' units carried to their end so far, each way (`bytes_down`, `bytes_up`).
    public var bytesDown: Int64
    public var bytesUp: Int64

    public init(
        name: String, match: String, state: LinkState, link: [ControlLinkNow], connections: Int,
        bytesDown: Int64 = 0, bytesUp: Int64 = 0
    ) {
        self.name = name
        self.match = match
        self.phase = state.phase
        self.outage = state.outage?.rawValue
        self.stalled = state.stalled.map(\.rawValue)
        self.link = link
        self.connections = connections
        self.bytesDown = bytesDown
        self.bytesUp = bytesUp
    }

    enum CodingKeys: String, CodingKey {
        case name, match, phase, outage, stalled, link, connections
        case bytesDown = "bytes_down"
        case bytesUp = "bytes_up"
    }

    /// `outage` is `null` when there is none: every key always there.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.name, forKey: .name)
        try container.encode(self.match, forKey: .match)
        try container.encode(self.phase, forKey: .phase)
        try container.encode(self.outage, forKey: .outage)
        try container.encode(self.stalled, forKey: .stalled)
        try container.encode(self.link, forKey: .link)
        try container.encode(self.connections, forKey: .connections)
        try container.encode(self.bytesDown, forKey: .bytesDown)
        try container.encode(self.bytesUp, forKey: .bytesUp)
    }

    /// A route as it stands (`view`), with the connections that took it.
    public init(_ view: RouteView, connections: Int) {
        self.init(
            name: view.route.name, match: view.route.match.description, state: view.state,
            link: [ControlLinkNow(.down, view.down), ControlLinkNow(.up, view.up)], connections: connections,
            bytesDown: view.delivered.down, bytesUp: view.delivered.up)
    }
}

/// `GET /routes`.
public struct ControlRoutes: Codable, Equatable, Sendable {
    public var routes: [ControlRoute]

    public init(routes: [ControlRoute]) {
        self.routes = routes
    }
}
