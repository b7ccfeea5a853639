import Testing

@testable import NetcondCore

/// `routes:` as a profile file writes them: matches, the destination's keys, and the errors that
/// say what a route cannot carry and why.
@Suite struct RouteDecodingTests {
    static func decode(_ yaml: String) throws(ConfigError) -> Profile {
        try ProfileDecoder().decode(yaml: yaml, file: "routes.yaml")
    }

    @Test func theIssueExampleReads() throws {
        let profile = try Self.decode(
            """
            extends: lte
            routes:
              - match: {host: "cdn.netcond.test"}
                link: {latency: 300ms, bandwidth: 2Mbit}
              - match: {host: "ads.netcond.test"}
                outage: blackhole
              - match: {host: "api.netcond.test"}
                faults: [{status: 503, retry_after: 2s, first: 2}]
              - name: far
                match: {address: [127.0.0.2/32, "::1/128"], port: [443, 8000-8100], protocol: tcp}
                down: {latency: 10ms}
            """)
        #expect(profile.routes.map(\.name) == ["cdn.netcond.test", "ads.netcond.test", "api.netcond.test", "far"])
        #expect(profile.routes[0].profile.up.latency == .milliseconds(300))
        #expect(profile.routes[0].profile.down.bandwidth == .mbit(2))
        #expect(profile.routes[1].outage == .blackhole)
        #expect(profile.routes[2].profile.faults.count == 1)
        #expect(profile.routes[3].match.ports == [443...443, 8000...8100])
        #expect(profile.routes[3].match.addresses.map(\.description) == ["127.0.0.2/32", "::1/128"])
        #expect(!profile.isPassThrough)
        // The access link is the profile's own (lte), untouched by the routes.
        #expect(profile.up == (try ProfileDecoder().decodeBuiltin(named: "lte")).up)
    }

    @Test(
        arguments: [
            ("routes: [{match: {host: a.test}, captive_portal: {}}]", "a captive portal is the access network's"),
            ("routes: [{match: {host: a.test}, tcp: bbr}]", "write tcp: at the profile's top level"),
            ("routes: [{link: {latency: 1s}}]", "a route needs match:"),
            ("routes: [{match: {address: 300.1.1.1/8}}]", "is not an address block"),
            ("routes: [{match: {address: 10.0.0.0/33}}]", "is not an address block"),
            ("routes: [{match: {port: 0}}]", "is not a port or a range of ports"),
            ("routes: [{match: {port: 90-80}}]", "is not a port or a range of ports"),
            ("routes: [{match: {protocol: icmp}}]", "allowed: tcp, udp"),
            ("routes: [{match: {host: 'a b'}}]", "is not a host name"),
            ("routes: [{match: {hots: a.test}}]", "did you mean 'host'"),
            ("routes: [{match: {host: a.test}, outage: off}]", "allowed: blackhole, refuse, reset"),
            ("routes: [{name: x, match: {}}, {name: x, match: {}}]", "a route named 'x' is already"),
            ("routes: [{match: {host: a.test}, routes: []}]", "routes do not nest"),
            ("routes: [{match: {address: 10.0.0.0/8}, dns_delay: 1s}]", "dns_delay: this route matches no host"),
        ] as [(String, String)])
    func aWrongRouteSaysWhatAndWhere(yaml: String, expected: String) {
        #expect {
            _ = try Self.decode(yaml)
        } throws: { error in
            let message = (error as? ConfigError)?.description ?? "\(error)"
            return message.contains(expected) && message.contains("routes.yaml:1")
        }
    }

    @Test func routesWithoutNamesAreNumberedWhenTheyWouldClash() throws {
        let profile = try Self.decode(
            "routes: [{match: {host: a.test, port: 80}}, {match: {host: a.test, port: 443}}, {match: {port: 1}}]")
        #expect(profile.routes.map(\.name) == ["a.test", "a.test#2", "port 1"])
    }

    @Test func aFileRoutesReplaceTheOnesItExtends() throws {
        let base = try Self.decode("routes: [{match: {host: a.test}}]")
        #expect(base.routes.count == 1)
        let empty = try Self.decode("extends: lte\nroutes: []")
        #expect(empty.routes.isEmpty)
    }
}

@Suite struct RouteTableTests {
    static func route(_ name: String, _ match: RouteMatch) -> Route {
        Route(name: name, match: match, profile: Profile(name: name))
    }

    @Test func theFirstMatchWins() {
        let table = RouteTable([
            Self.route("api", RouteMatch(hosts: ["api.example.test"])),
            Self.route("any", RouteMatch(hosts: ["*.example.test"])),
            Self.route("tls", RouteMatch(ports: [443...443])),
            Self.route("net", RouteMatch(addresses: [AddressBlock("10.0.0.0/8")!])),
            Self.route("glob", RouteMatch(hosts: ["cdn*.test"])),
        ])
        #expect(table.route(for: RouteTarget(host: "api.example.test", port: 80)) == 0)
        #expect(table.route(for: RouteTarget(host: "API.example.test", port: 443)) == 0)
        #expect(table.route(for: RouteTarget(host: "www.example.test", port: 443)) == 1)
        #expect(table.route(for: RouteTarget(host: "a.b.example.test", port: 80)) == 1)
        #expect(table.route(for: RouteTarget(host: "example.test", port: 443)) == 2)
        #expect(table.route(for: RouteTarget(named: "10.1.2.3", port: 80)) == 3)
        #expect(table.route(for: RouteTarget(named: "11.1.2.3", port: 80)) == nil)
        #expect(table.route(for: RouteTarget(host: "cdn2.test", port: 80)) == 4)
        #expect(table.route(for: RouteTarget(host: "other.test", port: 80)) == nil)
    }

    /// A look-up has no port or address yet: the first route whose hosts name the name.
    @Test func aLookUpFindsTheRouteWhoseHostsNameIt() {
        let table = RouteTable([
            Self.route("net", RouteMatch(addresses: [AddressBlock("10.0.0.0/8")!])),
            Self.route("tls", RouteMatch(hosts: ["cdn.example.test"], ports: [443...443])),
            Self.route("any", RouteMatch(hosts: ["*.example.test"])),
            Self.route("glob", RouteMatch(hosts: ["img*.test"])),
        ])
        #expect(table.route(lookingUp: "CDN.example.test") == 1)
        #expect(table.route(lookingUp: "www.example.test") == 2)
        #expect(table.route(lookingUp: "img7.test") == 3)
        #expect(table.route(lookingUp: "10.1.2.3") == nil)
        #expect(table.route(lookingUp: "other.test") == nil)
    }

    @Test func aThousandAddressRoutesFindTheirOwn() {
        let routes = (0..<1000).map { index in
            Self.route("r\(index)", RouteMatch(addresses: [AddressBlock("10.\(index / 250).\(index % 250).0/24")!]))
        }
        let table = RouteTable(routes)
        for index in stride(from: 0, to: 1000, by: 37) {
            let target = RouteTarget(address: [10, UInt8(index / 250), UInt8(index % 250), 7], port: 80)
            #expect(table.route(for: target) == index)
        }
    }

    static let loopback6: [UInt8] = [UInt8](repeating: 0, count: 15) + [1]
    static let linkLocal: [UInt8] = [0xfe, 0x80] + [UInt8](repeating: 0, count: 10) + [0, 1, 0, 2]
    static let mapped: [UInt8] = [UInt8](repeating: 0, count: 10) + [0xff, 0xff, 1, 2, 3, 4]

    @Test(
        arguments: [
            ("127.0.0.1", [127, 0, 0, 1]), ("::1", Self.loopback6), ("fe80::1:2", Self.linkLocal),
            ("::ffff:1.2.3.4", Self.mapped),
        ] as [(String, [UInt8])])
    func addressesParseAndPrint(text: String, bytes: [UInt8]) {
        #expect(AddressBlock.parseAddress(text) == bytes)
        #expect(AddressBlock.parseAddress(AddressBlock.format(bytes)) == bytes)
    }

    @Test(arguments: ["1.2.3", "1.2.3.4.5", "256.1.1.1", "1::2::3", ":::", "12345::", "a.b.c.d", "", "1.2.3.-4"])
    func notAddresses(text: String) {
        #expect(AddressBlock.parseAddress(text) == nil)
    }
}
