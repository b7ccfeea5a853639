import Foundation

/// Text from users' files and command lines as it may reach a terminal: names may not hold control
/// characters, and anything else printed has them escaped, so that a file cannot drive the terminal
/// (clear it, move the cursor, rewrite earlier lines, set the window title).
public enum TerminalText {
    /// What names may hold, for error messages.
    public static let allowedInNames = "printable characters (no control characters: U+0000–U+001F, U+007F–U+009F)"

    /// A C0 control (U+0000–U+001F), DEL (U+007F) or a C1 control (U+0080–U+009F, among them U+009B,
    /// which some terminals read as the start of an escape sequence).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// The first control character in `text` and its position (counted in characters from 1).
    public static func firstControl(in text: String) -> (scalar: Unicode.Scalar, position: Int)? {
        for (index, character) in text.enumerated() {
            if let scalar = character.unicodeScalars.first(where: Self.isControl) { return (scalar, index + 1) }
        }
        return nil
    }

    /// `text` with every control character written as an escape (`\n`, `\t`, `\r`, else `\u001B`),
    /// as YAML's double-quoted strings write them. Other text is unchanged.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: Self.isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                if Self.isControl(scalar) {
                    result += String(format: "\\u%04X", scalar.value)
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
    }

    /// One line to show: surrounding white space trimmed, line breaks and tabs inside made spaces,
    /// other control characters escaped.
    public static func oneLine(_ text: String) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        var line = ""
        for scalar in trimmed.unicodeScalars {
            line.unicodeScalars.append(scalar == "\n" || scalar == "\r" || scalar == "\t" ? " " : scalar)
        }
        return Self.escaped(line)
    }

    /// The longest quote of a user's text an error carries.
    public static let quoteLimit = 200

    /// A piece of a user's file as an error quotes it: its first line, at most ``quoteLimit``
    /// characters (then `…`), so that an error about a 20 MB file is one line, not the file.
    public static func quoted(_ text: some StringProtocol) -> String {
        let line = text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first ?? ""
        let clipped = line.count > Self.quoteLimit ? line.prefix(Self.quoteLimit) + "…" : String(line)
        return clipped.count < text.count && !clipped.hasSuffix("…") ? clipped + "…" : clipped
    }

    /// Why `name` cannot be a name, or nil when it can: `what` names it (`the scenario name`).
    public static func nameProblem(_ name: String, what: String) -> String? {
        guard let (scalar, position) = Self.firstControl(in: name) else { return nil }
        return "\(what) \"\(Self.escaped(name))\" has a control character (U+\(String(format: "%04X", scalar.value)))"
            + " at character \(position); allowed: \(Self.allowedInNames)"
    }
}

extension ConfigNode {
    /// The node's text as a name (`what`: "the scenario name"), refused when it holds a control
    /// character, with `example` as what to write instead.
    func name(expecting: String, what: String, example: String) throws(ConfigError) -> String {
        let text = try self.string(expecting: expecting)
        if let problem = TerminalText.nameProblem(text, what: what) {
            throw self.error("\(problem), e.g. \(example)")
        }
        return text
    }
}
