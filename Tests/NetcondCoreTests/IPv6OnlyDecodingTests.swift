import Foundation
import Testing

@testable import NetcondCore

/// `ipv6_only:` in profiles: what decodes, where it may stand, and every error's text.
@Suite struct IPv6OnlyDecodingTests: DecodesProfiles {
    @Test func trueIsTheWellKnownPrefixAndAMappingNamesAnother() throws {
        let spec = try #require(try self.decode("extends: lte\nipv6_only: true\n").ipv6Only)
        #expect(spec.prefix == IPv6OnlySpec.wellKnownPrefix && spec.prefixDescription == "64:ff9b::/96")
        #expect(spec.synthesized(text: "127.110.1.5") == "64:ff9b::7f6e:105")
        #expect(spec.embedded(spec.synthesized([192, 0, 2, 1])) == [192, 0, 2, 1])
        #expect(spec.embedded([0xfd] + [UInt8](repeating: 0, count: 15)) == nil)
        let other = try #require(try self.decode("ipv6_only: {nat64_prefix: '2001:db8:64::/96'}\n").ipv6Only)
        #expect(other.prefixDescription == "2001:db8:64::/96")
        #expect(try self.decode("ipv6_only: {}\n").ipv6Only == IPv6OnlySpec())
        #expect(try self.decode("down: {latency: 10ms}\n").ipv6Only == nil)
    }

    @Test func aFileTurnsOffWhatItExtendsAndTheDescriptionSaysIt() throws {
        let directory = NSTemporaryDirectory() + "netcond-ipv6only-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "ipv6_only: true\ndown: {latency: 10ms}\n".write(
            toFile: directory + "/base.yaml", atomically: true, encoding: .utf8)
        let off = try ProfileDecoder().decode(
            yaml: "extends: base.yaml\nipv6_only: false\n", file: directory + "/x.yaml")
        #expect(off.ipv6Only == nil)
        let on = try ProfileDecoder().decode(yaml: "extends: base.yaml\n", file: directory + "/y.yaml")
        #expect(on.ipv6Only != nil)
        #expect(on.yamlDescription.contains("ipv6_only: {nat64_prefix: 64:ff9b::/96}"))
        #expect(try self.decode(on.yamlDescription).ipv6Only == on.ipv6Only, "what it writes reads back")
    }

    @Test func theProxyRefusesItNamingThePacketEngine() throws {
        let refusal = try #require(try self.decode("ipv6_only: true\n").streamEngineRefusal)
        #expect(refusal.contains("ipv6_only (NAT64 at 64:ff9b::/96)") && refusal.contains("--engine packet"))
    }

    @Test func wrongValuesSayWhatIsAllowed() {
        #expect(
            self.error("ipv6_only: yes please\n")?.contains("ipv6_only: unknown value 'yes please'") == true)
        #expect(
            self.error("ipv6_only: {nat64_prefix: '64:ff9b::/64'}\n")?.contains(
                "'64:ff9b::/64' is not a /96: netcond puts the IPv4 address in the last 32 bits") == true)
        #expect(
            self.error("ipv6_only: {nat64_prefix: 10.0.0.0/8}\n")?.contains("'10.0.0.0/8' is not an IPv6 prefix")
                == true)
        #expect(
            self.error("ipv6_only: {nat64_prefix: '::ffff:0:0/96'}\n")?.contains("is IPv4-mapped (::ffff:0:0/96)")
                == true)
        #expect(self.error("ipv6_only: {nat64_prefix: 'ff02::/96'}\n")?.contains("is multicast") == true)
        #expect(self.error("ipv6_only: {prefix: '64:ff9b::/96'}\n")?.contains("unknown key 'prefix'") == true)
        #expect(
            self.error("ipv6_only: true\ncaptive_portal: {open: false}\n")?.contains(
                "Profiles/x.yaml:1:12: ipv6_only: ipv6_only and captive_portal together are not built yet") == true)
        #expect(
            self.error("routes:\n  - {name: api, host: api.netcond.test, ipv6_only: true}\n")?.contains(
                "an IPv6-only network is the device's access network") == true)
    }
}
