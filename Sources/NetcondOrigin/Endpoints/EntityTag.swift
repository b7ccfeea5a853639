/// An HTTP entity tag (`"204800-0"` or weak `W/"204800-0"`) and the two comparisons RFC 9110 §8.8.3.2 defines.
struct EntityTag: Hashable, Sendable {
    var opaque: Substring
    var isWeak: Bool

    init(opaque: Substring, isWeak: Bool = false) {
        self.opaque = opaque
        self.isWeak = isWeak
    }

    /// Parses one tag (surrounding whitespace allowed); `nil` if it is not a quoted entity tag.
    init?(parsing text: Substring) {
        var scanner = EntityTagScanner(text)
        guard let tag = scanner.nextTag(), scanner.isAtEnd else { return nil }
        self = tag
    }

    /// Strong comparison: both strong and the same opaque tag (used by `If-Range`).
    func strongMatches(_ other: EntityTag) -> Bool {
        !self.isWeak && !other.isWeak && self.opaque == other.opaque
    }

    /// Weak comparison: the same opaque tag, whatever the `W/` prefixes (used by `If-None-Match`).
    func weakMatches(_ other: EntityTag) -> Bool {
        self.opaque == other.opaque
    }

    /// Whether an `If-None-Match` value (`*` or a list of tags) matches `current`. A malformed list matches nothing,
    /// so a confused client gets the full response rather than a wrong 304.
    static func ifNoneMatch(_ header: String, matches current: EntityTag) -> Bool {
        let trimmed = header.trimmingWhitespace
        if trimmed == "*" { return true }
        var scanner = EntityTagScanner(trimmed)
        while let tag = scanner.nextTag() {
            if tag.weakMatches(current) { return true }
        }
        return false
    }

    var headerValue: String {
        (self.isWeak ? "W/" : "") + "\"\(self.opaque)\""
    }
}

/// Reads a comma-separated list of entity tags; stops at the first thing that is not one.
private struct EntityTagScanner {
    private let text: Substring
    private var position: Substring.Index

    init(_ text: Substring) {
        self.text = text
        self.position = text.startIndex
    }

    var isAtEnd: Bool {
        self.text[self.position...].allSatisfy { $0 == " " || $0 == "\t" }
    }

    mutating func nextTag() -> EntityTag? {
        self.skip { $0 == " " || $0 == "\t" || $0 == "," }
        var rest = self.text[self.position...]
        var isWeak = false
        if rest.hasPrefix("W/") {
            isWeak = true
            rest = rest.dropFirst(2)
        }
        guard rest.first == "\"" else { return nil }
        let opaqueStart = rest.index(after: rest.startIndex)
        guard let closing = rest[opaqueStart...].firstIndex(of: "\"") else { return nil }
        self.position = rest.index(after: closing)
        return EntityTag(opaque: rest[opaqueStart..<closing], isWeak: isWeak)
    }

    private mutating func skip(while predicate: (Character) -> Bool) {
        while self.position < self.text.endIndex && predicate(self.text[self.position]) {
            self.position = self.text.index(after: self.position)
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace).
    var trimmingWhitespace: Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = self.firstIndex(where: { !isSpace($0) }),
            let last = self.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return Substring(self[first...last])
    }
}
