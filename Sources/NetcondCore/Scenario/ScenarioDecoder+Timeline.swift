/// Timeline events with a decoder of their own: a handover, a change to one route.
extension ScenarioDecoder {
    /// `handover: {to: lte, gap: 2s}` (or `handover: lte`, no gap): the device leaves its network
    /// for `to:`'s (a built-in name, a profile file, or a mapping, as `profile:` takes), its
    /// connections stranded, nothing carried for `gap:` (0s…1h, default 0s).
    static func handover(_ value: ConfigNode) throws(ConfigError) -> ScenarioAction {
        let example = "handover: {to: lte, gap: 2s}"
        if value.node.scalar != nil {
            return .handover(try Self.profile(value, scenarioName: "timeline"), gap: .zero)
        }
        let entries = try value.mapping(allowedKeys: ["to", "gap"], expecting: "a handover (e.g. \(example))")
        guard let to = entries["to"] else {
            throw value.error("a handover needs to: (the profile of the network the device moves to); e.g. \(example)")
        }
        let gap = try entries["gap"]?.span(in: .zero...(.seconds(3600)), allowed: "0s…1h", example: example) ?? .zero
        return .handover(try Self.profile(to, scenarioName: "timeline"), gap: gap)
    }

    /// `{at: 5s, route: NAME, outage: refuse}` (or `stall:`, or `profile:` for the route's link).
    static func routeEvent(_ map: ConfigMapping, _ routeNode: ConfigNode, routeNames: [String])
        throws(ConfigError) -> ScenarioAction
    {
        let name = try routeNode.string(expecting: "a route's name (its name:, else its first host)")
        guard routeNames.contains(name) else {
            throw routeNode.error(
                routeNames.isEmpty
                    ? "no route '\(name)': the scenario's profile has no routes: (add them to its profile)"
                    : Suggestion.unknown("route", name, among: routeNames, listedAs: "routes"))
        }
        let example = "{at: 5s, route: \(name), outage: refuse}"
        let (kind, value) = try map.single(of: ["outage", "stall", "profile"], thing: "route change", example: example)
        for other in Self.timelineActions where !["outage", "stall", "profile"].contains(other) {
            if let node = map[other] {
                throw node.error(
                    "a route event changes the route's outage, stall or profile; '\(other)' is the whole link's")
            }
        }
        switch kind {
        case "outage":
            let word = try value.choice(OutageBehaviour.allCases.map(\.rawValue) + ["end"])
            return .route(name, .outage(OutageBehaviour(rawValue: word)))
        case "stall":
            let word = try value.choice(StallDirection.allCases.map(\.rawValue) + ["end"])
            return .route(name, .stall(StallDirection(rawValue: word)))
        default:
            return .route(name, .link(try Self.profile(value, scenarioName: "timeline")))
        }
    }
}
