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
}
