import NetcondCore
import NetcondTesting
import Testing

/// Every built-in profile has a static name, generated with the built-in table (so they cannot drift).
@Suite struct BuiltInNamesTests {
    @Test func everyBuiltInProfileHasAStaticName() throws {
        #expect(NetworkProfile.builtIn.map(\.description) == BuiltinProfiles.all.map(\.name))
        for profile in NetworkProfile.builtIn { _ = try profile.resolve() }
        #expect(NetworkProfile.threeG.description == "3g" && NetworkProfile.satelliteLEO.description == "satellite-leo")
    }
}
