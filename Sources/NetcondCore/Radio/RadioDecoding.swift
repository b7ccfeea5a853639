// MARK: - Decoding

extension RadioSpec {
    static let keys = [
        "model", "promotion", "promotion_power", "active_power", "inactivity", "tail", "tail_power", "second_tail",
        "second_tail_power", "idle_power",
    ]

    static let expecting = "a radio model (lte, 3g, 5g, wifi) or a mapping such as {model: lte, tail: 12s}"

    /// `radio: lte`, or `radio: {model: lte, tail: 12s, tail_power: 1.1W, …}`: the model's
    /// published constants, each key given overriding one.
    init(node: ConfigNode) throws(ConfigError) {
        if node.node.scalar != nil, !node.isNull {
            self = .defaults(try node.choice(Model.self))
            return
        }
        let map = try node.mapping(allowedKeys: Self.keys, expecting: Self.expecting)
        guard let modelNode = map["model"] else {
            throw node.error(
                "a radio needs model: (lte, 3g, 5g or wifi), whose published constants the other keys override; e.g. {model: lte, tail: 12s}"
            )
        }
        self = .defaults(try modelNode.choice(Model.self))
        let hour = Span.seconds(Int64(3600))
        if let node = map["promotion"] {
            self.promotion = try node.span(in: .zero...(.seconds(60)), allowed: "0…60s", example: "promotion: 0.3s")
        }
        if let node = map["inactivity"] {
            self.inactivity = try node.span(in: .zero...(.seconds(60)), allowed: "0…60s", example: "inactivity: 100ms")
        }
        if let node = map["tail"] {
            self.tail = try node.span(in: .zero...hour, allowed: "0…1h", example: "tail: 12s")
        }
        if let node = map["second_tail"] {
            self.secondTail = try node.span(in: .zero...hour, allowed: "0…1h", example: "second_tail: 12s")
        }
        if let node = map["promotion_power"] { self.promotionPower = try Self.power(node) }
        if let node = map["active_power"] { self.activePower = try Self.power(node) }
        if let node = map["tail_power"] { self.tailPower = try Self.power(node) }
        if let node = map["second_tail_power"] { self.secondTailPower = try Self.power(node) }
        if let node = map["idle_power"] { self.idlePower = try Self.power(node) }
    }

    private static func power(_ node: ConfigNode) throws(ConfigError) -> Power {
        let text = try node.string(expecting: "a power (e.g. 1.06W, 20mW)")
        do {
            return try Power.parse(text)
        } catch {
            throw node.error(error.message)
        }
    }
}
