import Foundation

/// A mistake in a user's file (profile or scenario): where it is and what is allowed instead.
///
/// The description is the one line a user sees, compiler style, so editors can jump to it:
///
/// ```
/// Profiles/x.yaml:3:9: down.loss: 150% is more than 100%; allowed: a percentage 0%…100% (e.g. 1%) …
/// └── file ─────┘ │ │  └ keyPath ┘  └── message ──────────────────────────────────────────────────┘
///            line ┘ └ column
/// ```
///
/// `line` and `column` start at 1; 0 means "the whole file" (a missing file, an unknown profile
/// name given on the command line), and then the description leaves them out.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file as the user named it (empty for a name given on the command line).
    public var file: String
    public var line: Int
    public var column: Int
    /// Dotted path of the key the error is about (`down.loss`, `events[2].at`); empty for the file.
    public var keyPath: String
    /// What is wrong and what is allowed, with an example.
    public var message: String
    /// The other errors found in the same file, in file order, when reading could go on past this
    /// one (a bad key does not stop the next key being read); `netcond validate` shows them all.
    public var alsoFound: [ConfigError] = []

    public init(file: String, line: Int = 0, column: Int = 0, keyPath: String = "", message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.keyPath = keyPath
        self.message = message
    }

    /// This error and the others found with it, in file order.
    public var all: [ConfigError] {
        var first = self
        first.alsoFound = []
        return [first] + self.alsoFound
    }

    /// `file:line:column` (or less, when unknown).
    public var location: String {
        var parts: [String] = []
        if !self.file.isEmpty { parts.append(self.file) }
        if self.line > 0 {
            parts.append("\(self.line)")
            if self.column > 0 { parts.append("\(self.column)") }
        }
        return parts.joined(separator: ":")
    }

    /// The line a user sees, then one line for each other error found with it (at most
    /// ``shownWithFirst``; `netcond validate` lists every one), as a compiler lists its errors.
    /// Control characters (from the file's own text, or its name) are escaped, so that an error
    /// about a hostile file cannot drive the terminal.
    public var description: String {
        var lines = [self.oneLine] + self.alsoFound.prefix(Self.shownWithFirst).map(\.oneLine)
        if self.alsoFound.count > Self.shownWithFirst {
            let more = self.alsoFound.count - Self.shownWithFirst
            lines.append(
                TerminalText.escaped(
                    "\(self.file): \(more) more error\(more == 1 ? "" : "s") (netcond validate \(self.file) lists every one)"
                ))
        }
        return lines.joined(separator: "\n")
    }

    /// Other errors a description shows after the first.
    public static let shownWithFirst = 9

    /// This error alone, on one line.
    public var oneLine: String {
        var text = self.location
        if !text.isEmpty { text += ": " }
        if !self.keyPath.isEmpty { text += "\(self.keyPath): " }
        return TerminalText.escaped(text + self.message)
    }
}

/// Profiles use the shared configuration error.
public typealias ProfileError = ConfigError

/// The errors of one file, gathered key by key: a decoder reads each key under ``attempt(_:)`` and
/// goes on to the next when one is wrong, then ``check()`` throws them together, so that a user
/// fixing a file sees every mistake in one run rather than one per run. Errors that depend on
/// several keys together (a queue smaller than the mss) are found once the keys themselves are right.
final class ConfigProblems {
    /// The file being read: its errors come first, in file order, then those of files it names
    /// (a scenario's profile file), each file's together.
    let file: String
    private(set) var errors: [ConfigError] = []

    init(file: String) {
        self.file = file
    }

    /// Runs `body`; an error it throws (with the ones it carries) is noted, and nil returned.
    @discardableResult
    func attempt<T>(_ body: () throws(ConfigError) -> T) -> T? {
        do {
            return try body()
        } catch {
            self.note(error)
            return nil
        }
    }

    func note(_ error: ConfigError) {
        self.errors.append(contentsOf: error.all)
    }

    /// Throws the first error in file order, carrying the others (``ConfigError/alsoFound``).
    func check() throws(ConfigError) {
        guard !self.errors.isEmpty else { return }
        let file = self.file
        let ordered = self.errors.enumerated().sorted { a, b in
            let (x, y) = (a.element, b.element)
            return (x.file == file ? 0 : 1, x.file, x.line, x.column, a.offset) < (
                y.file == file ? 0 : 1, y.file, y.line, y.column, b.offset
            )
        }.map(\.element)
        var first = ordered[0]
        first.alsoFound = Array(ordered.dropFirst())
        throw first
    }
}

// MARK: - Suggestions

/// "Did you mean" support: the candidate closest to a misspelt word, if it is close enough.
public enum Suggestion {
    /// The nearest candidate by edit distance (case-insensitive), or nil when none is plausibly meant:
    /// at most 1 edit for short words, 2 for words of 5+ letters, 3 for 9+.
    public static func nearest(to word: String, in candidates: [String]) -> String? {
        let lowered = word.lowercased()
        let limit = lowered.count >= 9 ? 3 : (lowered.count >= 5 ? 2 : 1)
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = self.editDistance(lowered, candidate.lowercased())
            if distance <= limit, distance < (best?.distance ?? Int.max) {
                best = (candidate, distance)
            }
        }
        if best == nil {
            // A prefix (`band` for `bandwidth`) or a different separator (`dns-delay`) is also a hint.
            let normalized = lowered.replacingOccurrences(of: "-", with: "_")
            best =
                candidates
                .first { $0 == normalized || (lowered.count >= 3 && $0.hasPrefix(lowered)) }
                .map { ($0, 0) }
        }
        return best?.candidate
    }

    /// Optimal string alignment distance (Levenshtein plus adjacent transposition).
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    value = min(value, table[i - 2][j - 2] + 1)
                }
                table[i][j] = value
            }
        }
        return table[a.count][b.count]
    }

    /// `unknown key 'lantecy'; did you mean 'latency'? allowed keys: latency, jitter` — or without
    /// the question when nothing is close.
    public static func unknown(_ what: String, _ word: String, among candidates: [String], listedAs: String) -> String {
        let list = "\(listedAs): \(candidates.joined(separator: ", "))"
        guard let nearest = self.nearest(to: word, in: candidates) else {
            return "unknown \(what) '\(word)'; \(list)"
        }
        return "unknown \(what) '\(word)'; did you mean '\(nearest)'? \(list)"
    }
}
