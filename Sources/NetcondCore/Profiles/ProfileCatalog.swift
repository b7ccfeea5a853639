/// The built-in profiles and how a name or path typed by a user becomes a `Profile`.
///
/// ```
///   "edge"                    → built-in (Profiles/edge.yaml, compiled in)
///   "none"                    → Profile.passThrough
///   "./my.yaml", "x/edge"     → a file (contains `/` or ends in .yaml / .yml)
///   "edg"                     → error: unknown profile 'edg'; did you mean 'edge'? built-in profiles: …
/// ```
public enum ProfileCatalog {
    /// Every built-in profile, decoded, in catalog order (slow cellular first, special cases last).
    /// Does not include `none` (`Profile.passThrough`), which `resolve` also accepts.
    public static let builtin: [Profile] = BuiltinProfiles.all.map { entry in
        do {
            return try ProfileDecoder().decodeBuiltin(named: entry.name)
        } catch {
            // The built-ins are part of the program and tested; a broken one is a bug, not input.
            preconditionFailure("built-in profile '\(entry.name)' is invalid: \(error)")
        }
    }

    /// Names of the built-in profiles in catalog order.
    public static var builtinNames: [String] { BuiltinProfiles.all.map(\.name) }

    /// Every name `resolve` accepts without a file: the built-ins and `none`.
    public static var knownNames: [String] { self.builtinNames + [Profile.passThrough.name] }

    /// A built-in by name, or nil.
    public static func builtin(named name: String) -> Profile? {
        if name == Profile.passThrough.name { return Profile.passThrough }
        return self.builtin.first { $0.name == name }
    }

    /// Resolves what a user typed: a built-in name (`edge`), `none`, or a path to a YAML profile
    /// (anything containing `/` or ending in `.yaml` / `.yml`).
    public static func resolve(_ nameOrPath: String) throws(ConfigError) -> Profile {
        if self.looksLikePath(nameOrPath) {
            return try ProfileDecoder().decodeFile(atPath: nameOrPath)
        }
        if let profile = self.builtin(named: nameOrPath) {
            return profile
        }
        throw ConfigError(
            file: "",
            message: Suggestion.unknown("profile", nameOrPath, among: self.knownNames, listedAs: "built-in profiles")
                + " (or give a path to a .yaml file)"
        )
    }

    /// True when `text` names a file rather than a built-in.
    public static func looksLikePath(_ text: String) -> Bool {
        text.contains("/") || text.hasSuffix(".yaml") || text.hasSuffix(".yml")
    }
}
