import Foundation
import Yams

/// A YAML node of a user file, with the file name, its position and the key path that led to it.
///
/// This is the reader that profile and scenario decoding share: every accessor either returns a
/// typed value or throws a `ConfigError` that already points at the right `file:line:column` and
/// key path, so decoders read like a schema and never lose track of where a value came from.
///
/// ```
/// let root = try ConfigNode.parse(yaml: text, file: "Profiles/edge.yaml")
/// let map = try root.mapping(allowedKeys: ["name", "down"])   // unknown keys → "did you mean"
/// let latency = try map["down"]?.mapping(allowedKeys: …)["latency"]?.unit(Span.parse)
/// ```
public struct ConfigNode {
    public let node: Node
    /// The file as the user named it.
    public let file: String
    /// Dotted key path from the document root (`down.loss`, `events[2]`); empty for the root.
    public let keyPath: String
    public let line: Int
    public let column: Int

    public init(node: Node, file: String, keyPath: String, line: Int, column: Int) {
        self.node = node
        self.file = file
        self.keyPath = keyPath
        self.line = node.mark?.line ?? line
        self.column = node.mark?.column ?? column
    }

    /// Parses one YAML document. Syntax errors, duplicate keys and an empty document become
    /// `ConfigError`s with the position Yams reports.
    public static func parse(yaml: String, file: String) throws(ConfigError) -> ConfigNode {
        // Before composing: what walks the tree afterwards walks every alias's nodes again.
        if let (line, column) = YAMLExpansion.firstExcess(in: yaml) {
            let limit = YAMLExpansion.maximumNodes
            throw ConfigError(
                file: file, line: line, column: column,
                message: "the document stands for more than \(limit) values once its aliases (*name) are expanded; "
                    + "allowed: up to \(limit) (aliases of aliases multiply: write the values out, or alias less)")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw self.translate(error, yaml: yaml, file: file)
        } catch {
            throw ConfigError(file: file, line: 1, column: 1, message: "cannot read YAML: \(error)")
        }
        if let root, let tagged = Self.firstUnsupportedTag(in: root) {
            let at = ConfigNode(node: tagged, file: file, keyPath: "", line: 1, column: 1)
            throw at.error(
                "the YAML tag '\(tagged.tag.rawValue)' means nothing here and would be ignored; "
                    + "allowed: plain values, quoted strings, mappings and lists, without tags")
        }
        let rootNode = root.map { ConfigNode(node: $0, file: file, keyPath: "", line: 1, column: 1) }
        guard let rootNode, !rootNode.isNull else {
            throw ConfigError(
                file: file, line: 1, column: 1,
                message: "the document is empty; expected a mapping of keys (e.g. `down: {latency: 100ms}`)"
            )
        }
        return rootNode
    }

    /// Tags of YAML's core schema (what an untagged value resolves to, or `!!str` and the like).
    static let coreTags: Set<String> = [
        "str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge", "value", "binary", "omap", "set",
    ].reduce(into: []) { $0.insert("tag:yaml.org,2002:" + $1) }

    /// The first node carrying a tag outside the core schema (`!!python/object`, `!custom`).
    static func firstUnsupportedTag(in node: Node) -> Node? {
        if !node.tag.rawValue.isEmpty, node.tag.rawValue != "?", node.tag.rawValue != "!",
            !Self.coreTags.contains(node.tag.rawValue)
        {
            return node
        }
        switch node {
        case .mapping(let mapping):
            for (key, value) in mapping {
                if let found = Self.firstUnsupportedTag(in: key) ?? Self.firstUnsupportedTag(in: value) { return found }
            }
        case .sequence(let sequence):
            for element in sequence {
                if let found = Self.firstUnsupportedTag(in: element) { return found }
            }
        case .scalar, .alias:
            break
        }
        return nil
    }

    /// An error located at this node.
    public func error(_ message: String) -> ConfigError {
        ConfigError(file: self.file, line: self.line, column: self.column, keyPath: self.keyPath, message: message)
    }

    /// True for `~`, `null` or a key with nothing after it.
    public var isNull: Bool {
        guard let scalar = self.node.scalar else { return false }
        return scalar.style == .plain && self.node.null != nil
    }

    /// What the node is, for "expected X, found Y" messages.
    public var kindDescription: String {
        switch self.node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case .scalar(let scalar):
            if self.isNull { return "nothing" }
            let text = scalar.string.count > 40 ? String(scalar.string.prefix(40)) + "…" : scalar.string
            return "'\(text)'"
        }
    }

    /// The text as written, for messages: the scalar's first line, at most 200 characters
    /// (``TerminalText/quoted(_:)``), or what kind of node it is.
    public var text: String {
        TerminalText.quoted(self.value)
    }

    /// The text as written, whole: the scalar's text, or what kind of node it is.
    public var value: String {
        guard let scalar = self.node.scalar, !self.isNull else { return self.kindDescription }
        return scalar.string.trimmingCharacters(in: .whitespaces)
    }

    /// The node as a mapping whose keys must come from `allowedKeys` (in the order given, which is
    /// also the order the error message lists them in). A null node reads as an empty mapping.
    /// `hints` adds a sentence for keys that are known to be put in the wrong place.
    /// With `problems`, an unknown key is noted there and left out, and the other keys are read.
    public func mapping(
        allowedKeys: [String],
        expecting: String = "a mapping",
        hints: [String: String] = [:]
    ) throws(ConfigError) -> ConfigMapping {
        try self.mapping(allowedKeys: allowedKeys, expecting: expecting, hints: hints, problems: nil)
    }

    func mapping(
        allowedKeys: [String],
        expecting: String = "a mapping",
        hints: [String: String] = [:],
        problems: ConfigProblems?
    ) throws(ConfigError) -> ConfigMapping {
        var entries: [(key: String, value: ConfigNode)] = []
        var unknown: [String] = []
        if self.isNull {
            return ConfigMapping(node: self, entries: entries)
        }
        guard case .mapping(let mapping) = self.node else {
            throw self.error("expected \(expecting), found \(self.kindDescription)")
        }
        for (keyNode, valueNode) in mapping {
            let keyLine = keyNode.mark?.line ?? self.line
            let keyColumn = keyNode.mark?.column ?? self.column
            guard case .scalar(let keyScalar) = keyNode else {
                throw ConfigError(
                    file: self.file, line: keyLine, column: keyColumn, keyPath: self.keyPath,
                    message: "keys must be plain words; allowed keys: \(allowedKeys.joined(separator: ", "))"
                )
            }
            let key = keyScalar.string
            let childPath = self.keyPath.isEmpty ? key : "\(self.keyPath).\(key)"
            guard allowedKeys.contains(key) else {
                let list = "allowed keys: \(allowedKeys.joined(separator: ", "))"
                let error = ConfigError(
                    file: self.file, line: keyLine, column: keyColumn, keyPath: childPath,
                    message: hints[key].map { "unknown key '\(key)'; \($0); \(list)" }
                        ?? Suggestion.unknown("key", key, among: allowedKeys, listedAs: "allowed keys")
                )
                guard let problems else { throw error }
                problems.note(error)
                unknown.append(key)
                continue
            }
            entries.append(
                (
                    key,
                    ConfigNode(
                        node: valueNode, file: self.file, keyPath: childPath, line: keyLine, column: keyColumn
                    )
                ))
        }
        return ConfigMapping(node: self, entries: entries, unknownKeys: unknown, allowedKeys: allowedKeys)
    }

    /// The node as a mapping whose keys are the user's own (file names, variable names): each
    /// entry with its key, the value positioned and key-pathed under it. Keys must be plain words.
    public func entries(expecting: String) throws(ConfigError) -> [(key: String, value: ConfigNode)] {
        if self.isNull { return [] }
        guard case .mapping(let mapping) = self.node else {
            throw self.error("expected \(expecting), found \(self.kindDescription)")
        }
        var entries: [(key: String, value: ConfigNode)] = []
        for (keyNode, valueNode) in mapping {
            let line = keyNode.mark?.line ?? self.line
            let column = keyNode.mark?.column ?? self.column
            guard case .scalar(let keyScalar) = keyNode, !keyScalar.string.isEmpty else {
                throw ConfigError(
                    file: self.file, line: line, column: column, keyPath: self.keyPath,
                    message: "keys must be plain words; expected \(expecting)")
            }
            let key = keyScalar.string
            let path = self.keyPath.isEmpty ? key : "\(self.keyPath).\(key)"
            entries.append(
                (key, ConfigNode(node: valueNode, file: self.file, keyPath: path, line: line, column: column)))
        }
        return entries
    }

    /// A duration in `range`; otherwise "TEXT is out of range; allowed: ALLOWED (e.g. EXAMPLE)".
    public func span(in range: ClosedRange<Span>, allowed: String, example: String) throws(ConfigError) -> Span {
        let value = try self.unit(Span.parse)
        guard range.contains(value) else {
            throw self.error("\(self.text) is out of range; allowed: \(allowed) (e.g. \(example))")
        }
        return value
    }

    /// A delay a profile or phase adds to set-up (`dns_delay`, `connect_delay`): 0…1h.
    public func setupDelay(example: String) throws(ConfigError) -> Span {
        let value = try self.unit(Span.parse)
        guard value <= .seconds(Int64(3600)) else {
            throw self.error("\(self.text) is more than 1 hour; allowed: 0…1h (e.g. \(example))")
        }
        return value
    }

    /// A switch that only makes sense on (`drop_response: true`, `hang: true`): `false` is an error.
    public func onlyTrue(_ key: String) throws(ConfigError) {
        guard try self.choice(["true", "false"]) == "true" else {
            throw self.error("\(key): false does nothing; allowed: true (or remove the entry)")
        }
    }

    /// A whole number in `range`; otherwise an error saying what it should be.
    public func integer(in range: ClosedRange<Int>, meaning: String) throws(ConfigError) -> Int {
        let text = try self.numberText(expecting: meaning)
        guard let value = Int(text), range.contains(value) else {
            throw self.error(
                "'\(text)' is not \(meaning); allowed: a whole number \(range.lowerBound)…\(range.upperBound)")
        }
        return value
    }

    /// The text of a node that must be a number: a number in quotes is text, and is refused
    /// (a file saying `status: '503'` meant something else, or was written by a tool that did).
    public func numberText(expecting: String) throws(ConfigError) -> String {
        let text = try self.string(expecting: expecting)
        if let scalar = self.node.scalar, scalar.style != .plain {
            throw self.error("'\(text)' is quoted, so it is text, not \(expecting); allowed: the number without quotes")
        }
        return text
    }

    /// The text of a node that must be text: a plain `-1`, `1.5` or `true` is YAML's number or
    /// boolean, and is refused (a file saying `output: -1` meant something else); in quotes it is text.
    public func text(expecting: String) throws(ConfigError) -> String {
        let text = try self.string(expecting: expecting)
        if let scalar = self.node.scalar, scalar.style == .plain, Self.looksTyped(text) {
            throw self.error(
                "'\(text)' is a number or a boolean in YAML, not \(expecting); allowed: text, quoted if it looks like a number ('\(text)')"
            )
        }
        return text
    }

    private static func looksTyped(_ text: String) -> Bool {
        if Int(text) != nil || Double(text) != nil { return true }
        return ["true", "false", "yes", "no", "on", "off", "~", ".inf", "-.inf", ".nan"].contains(text.lowercased())
    }

    /// The node as a list.
    public func list() throws(ConfigError) -> [ConfigNode] {
        if self.isNull { return [] }
        guard case .sequence(let sequence) = self.node else {
            throw self.error("expected a list, found \(self.kindDescription)")
        }
        return sequence.enumerated().map { index, element in
            ConfigNode(
                node: element, file: self.file, keyPath: "\(self.keyPath)[\(index)]",
                line: self.line, column: self.column
            )
        }
    }

    /// The node's text; it must be a scalar (a word, number or quoted string) and not empty.
    public func string(expecting: String = "a value") throws(ConfigError) -> String {
        guard case .scalar(let scalar) = self.node else {
            throw self.error("expected \(expecting), found \(self.kindDescription)")
        }
        guard !self.isNull else {
            throw self.error("has no value; expected \(expecting)")
        }
        return scalar.string
    }

    /// The node's text read in a unit (`try node.unit(Span.parse)`); unit errors get this node's
    /// position and key path.
    public func unit<Value>(_ parse: (String) throws(UnitParseError) -> Value) throws(ConfigError) -> Value {
        let text = try self.string(expecting: "a value")
        do {
            return try parse(text)
        } catch {
            throw self.error(error.message)
        }
    }

    /// One of a fixed set of words (`cubic`, `bbr`), with a suggestion when misspelt.
    public func choice(_ allowed: [String]) throws(ConfigError) -> String {
        let list = allowed.joined(separator: ", ")
        let text = try self.string(expecting: "one of \(list)")
        guard allowed.contains(text) else {
            throw self.error(Suggestion.unknown("value", text, among: allowed, listedAs: "allowed"))
        }
        return text
    }

    /// One of an enumeration's raw values (`refuse`, `blackhole`), as the case.
    public func choice<Choice: CaseIterable & RawRepresentable>(_ type: Choice.Type) throws(ConfigError) -> Choice
    where Choice.RawValue == String {
        let word = try self.choice(type.allCases.map(\.rawValue))
        // `choice` accepted only raw values of `type`.
        return Choice(rawValue: word)!
    }

    /// libyaml's words where they name its own API or leave the reader guessing, in the file's terms.
    static func plain(_ problem: String) -> String {
        if problem.contains("yaml_set_max_nest_level") || problem.lowercased().contains("maximum nesting level") {
            return "nested too deep (lists or mappings inside one another more than libyaml's limit); "
                + "a profile or a scenario needs a few levels"
        }
        if problem.contains("undefined alias") {
            return "found undefined alias: a *name here refers to no &name anchor before it"
        }
        return problem
    }

    static func translate(_ error: YamlError, yaml: String, file: String) -> ConfigError {
        func syntax(_ context: YamlError.Context?, _ problem: String, _ mark: Mark) -> ConfigError {
            var message = "YAML syntax error: \(self.plain(problem))"
            if let context { message += " (\(context.text) at \(context.mark.line):\(context.mark.column))" }
            return ConfigError(file: file, line: mark.line, column: mark.column, message: message)
        }
        switch error {
        case .scanner(let context, let problem, let mark, _),
            .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            return syntax(context, problem, mark)
        case .reader(let problem, let offset, _, _):
            let (line, column) = self.lineAndColumn(ofCharacterOffset: offset ?? 0, in: yaml)
            return ConfigError(file: file, line: line, column: column, message: "cannot read the file: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.sorted().map { "'\($0)'" }.joined(separator: ", ")
            return ConfigError(
                file: file, line: context.mark.line, column: context.mark.column,
                message: "duplicate key \(keys): each key may appear only once in a mapping"
            )
        default:
            return ConfigError(file: file, line: 1, column: 1, message: "cannot read YAML: \(error)")
        }
    }

    static func lineAndColumn(ofCharacterOffset offset: Int, in text: String) -> (Int, Int) {
        var line = 1
        var column = 1
        for (index, character) in text.enumerated() {
            if index >= offset { break }
            if character == "\n" || character == "\r\n" {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return (line, column)
    }
}

/// A mapping read by `ConfigNode.mapping(allowedKeys:)`: its entries in file order.
public struct ConfigMapping {
    /// The mapping node itself (for errors about a missing key).
    public let node: ConfigNode
    public let entries: [(key: String, value: ConfigNode)]
    /// Keys that are not allowed, left out (read with a `ConfigProblems`, which noted each).
    var unknownKeys: [String] = []
    var allowedKeys: [String] = []

    public subscript(key: String) -> ConfigNode? {
        self.entries.first { $0.key == key }?.value
    }

    /// Whether `key`, absent, may be one of the unknown keys misspelt (`orgin` for `origin`): its
    /// absence then proves nothing, and what would follow from it (a default, "missing required
    /// key") is not claimed while the misspelling stands.
    func mayBeMisspelt(_ key: String) -> Bool {
        self[key] == nil && self.unknownKeys.contains { Suggestion.nearest(to: $0, in: self.allowedKeys) == key }
    }

    /// The one key of `kinds` an entry gives (a fault's action, a timeline event's change), with
    /// its value. None, or two, is an error naming the `thing` and showing an `example`.
    public func single(of kinds: [String], thing: String, example: String) throws(ConfigError) -> (
        kind: String, value: ConfigNode
    ) {
        let given = self.entries.filter { kinds.contains($0.key) }  // in the file's order
        let list = kinds.joined(separator: ", ")
        guard let first = given.first else {
            throw self.node.error(
                "the \(thing) does nothing: it says what to do with none of its keys; allowed: one of \(list) (e.g. \(example))"
            )
        }
        if given.count > 1 {
            throw given[1].value.error(
                "one \(thing) does one thing, and this one already has \(first.key); allowed: one of \(list) per entry (add another entry)"
            )
        }
        return (first.key, first.value)
    }

    /// The value of a key that must be present.
    public func required(_ key: String, meaning: String) throws(ConfigError) -> ConfigNode {
        guard let value = self[key] else {
            let path = self.node.keyPath.isEmpty ? key : "\(self.node.keyPath).\(key)"
            throw ConfigError(
                file: self.node.file, line: self.node.line, column: self.node.column, keyPath: path,
                message: "missing required key '\(key)' (\(meaning))"
            )
        }
        return value
    }
}
