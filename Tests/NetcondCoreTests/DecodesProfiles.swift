@testable import NetcondCore

/// A suite that reads profile text as a file `Profiles/x.yaml` would be read: the profile, or the
/// whole text of its errors.
protocol DecodesProfiles {}

extension DecodesProfiles {
    static var file: String { "Profiles/x.yaml" }

    func decode(_ yaml: String) throws -> Profile {
        try ProfileDecoder().decode(yaml: yaml, file: Self.file)
    }

    /// The whole error text, or nil when it decodes.
    func error(_ yaml: String) -> String? {
        do {
            _ = try ProfileDecoder().decode(yaml: yaml, file: Self.file)
            return nil
        } catch {
            return error.description
        }
    }
}
