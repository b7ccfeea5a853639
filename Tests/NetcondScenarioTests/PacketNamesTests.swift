import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NetcondCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import NetcondPacket
@testable import NetcondScenario

/// The packet engine's own names: an address each, the responder's answers, the resolv.conf the
/// command sees.
@Suite struct PacketNamesTests {
    /// An A (or `type`) query for `name`, id 0x4242, RD set.
    static func query(_ name: String, type: UInt8 = 1) -> [UInt8] {
        [0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
            + name.split(separator: ".").flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0, 0, type, 0, 1]
    }

    /// Names whose listeners "bind" except on the addresses `taken` says another run holds.
    static func names(
        taken: @escaping @Sendable (String) -> Bool = { _ in false }, loop: EventLoop
    ) -> (PacketNames, NIOLockedValueBox<[String]>) {
        let bound = NIOLockedValueBox<[String]>([])
        let names = PacketNames(fixed: [("origin.netcond.test", "127.110.0.1")], loop: loop) { address in
            if taken(address) { throw TemporaryFiles.Failure(description: "taken") }
            bound.withLockedValue { $0.append(address) }
        }
        return (names, bound)
    }

    @Test func eachNameGetsAnAddressOfItsOwnAndKeepsIt() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let (names, bound) = Self.names(loop: group.next())
        let cdn = try await names.lookup("cdn.netcond.test").get()
        let api = try await names.lookup("api.netcond.test").get()
        #expect(cdn != api && cdn != .address("127.110.0.1"))
        #expect(try await names.lookup("cdn.netcond.test").get() == cdn)
        #expect(try await names.lookup("origin.netcond.test").get() == .address("127.110.0.1"))
        #expect(names.knownNames().map(\.name) == ["origin.netcond.test", "cdn.netcond.test", "api.netcond.test"])
        #expect(bound.withLockedValue { $0.count } == 2, "the origin's own address is not bound again")
    }

    @Test func anAddressAnotherRunHoldsIsPassedOverAndTheLimitFailsTheRest() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        // Another run holds every address ending in an odd number.
        let (shared, _) = Self.names(taken: { Int($0.split(separator: ".").last ?? "")! % 2 == 1 }, loop: group.next())
        for index in 0..<5 {
            guard case .address(let address) = try await shared.lookup("n\(index).netcond.test").get() else {
                Issue.record("n\(index) got no address")
                continue
            }
            #expect(Int(address.split(separator: ".").last ?? "")! % 2 == 0, "\(address)")
        }
        let (names, _) = Self.names(loop: group.next())
        var results: [PacketNames.Lookup] = []
        for index in 0...PacketNames.limit {
            results.append(try await names.lookup("n\(index).netcond.test").get())
        }
        #expect(Set(results).count == PacketNames.limit + 1, "64 addresses, all different, then a failure")
        #expect(results.last == .failed)
        #expect(names.knownNames().count == 1 + PacketNames.limit)
    }

    @Test func theResponderAnswersItsNamesAndRefusesTheRest() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let (names, _) = Self.names(loop: loop)
        func ask(_ query: [UInt8]) async throws -> DNSAnswers? {
            let reply = try #require(PacketDNSResponder.answer(query, names: names, loop: loop))
            return DNSAnswers.parse(try await reply.get())
        }
        let origin = try await ask(Self.query("Origin.netcond.test"))
        #expect(origin?.mappings == [.init(name: "origin.netcond.test", address: "127.110.0.1")])
        let cdn = try #require(try await ask(Self.query("cdn.netcond.test"))?.mappings.first)
        #expect(cdn.address.hasPrefix("127.110.") && cdn.address != "127.110.0.1")
        // AAAA: no error, no answer; another name: refused (rcode 5), so the resolver asks the next.
        let aaaa = try #require(
            PacketDNSResponder.answer(Self.query("cdn.netcond.test", type: 28), names: names, loop: loop))
        let noAnswer = try await aaaa.get()
        #expect(noAnswer[3] & 0x0f == 0 && noAnswer[7] == 0 && noAnswer[2] & 0x80 != 0)
        let refused = try #require(PacketDNSResponder.answer(Self.query("example.com"), names: names, loop: loop))
        #expect(try await refused.get()[3] & 0x0f == 5)
        // Not a query: no reply at all.
        var response = Self.query("cdn.netcond.test")
        response[2] |= 0x80
        #expect(PacketDNSResponder.answer(response, names: names, loop: loop) == nil)
        #expect(PacketDNSResponder.answer([1, 2, 3], names: names, loop: loop) == nil)
    }

    @Test func theResolvConfNamesTheResponderFirstAndKeepsTheMachinesLines() {
        let machine = "# comment\nsearch corp.example\nnameserver 10.0.0.53\noptions ndots:2 rotate\n"
        let text = PacketNames.resolvConf(responder: "127.110.3.4", machine: machine)
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(lines == ["nameserver 127.110.3.4", "search corp.example", "nameserver 10.0.0.53", "options ndots:2"])
        // No nameserver on the machine: glibc's default, 127.0.0.1, after the responder.
        #expect(PacketNames.resolvConf(responder: "127.110.3.4", machine: "").hasSuffix("nameserver 127.0.0.1\n"))
    }

    @Test func anIPv6OnlyRunsResponderIsTheNetworksDNS64() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let (names, _) = Self.names(loop: loop)
        let dns64 = IPv6OnlySpec()
        func ask(_ name: String, type: UInt8) async throws -> [UInt8] {
            let reply = try #require(
                PacketDNSResponder.answer(Self.query(name, type: type), names: names, loop: loop, dns64: dns64))
            return try await reply.get()
        }
        // AAAA: the IPv4 address in 64:ff9b::/96; A: no error, no answer.
        let aaaa = DNSAnswers.parse(try await ask("origin.netcond.test", type: 28))
        #expect(aaaa?.mappings == [.init(name: "origin.netcond.test", address: "64:ff9b::7f6e:1")])
        let a = try await ask("origin.netcond.test", type: 1)
        #expect(a[3] & 0x0f == 0 && a[7] == 0)
        // RFC 7050: ipv4only.arpa gives the prefix away.
        let arpa = DNSAnswers.parse(try await ask("ipv4only.arpa", type: 28))
        #expect(arpa?.mappings.map(\.address) == ["64:ff9b::c000:aa", "64:ff9b::c000:ab"])
        // Another name is this machine's to look up (a name under .invalid never resolves).
        #expect(try await ask("gone.invalid", type: 28)[3] & 0x0f == 3)
        // Each A and AAAA question for the run's names is noted (its moment for the evidence).
        #expect(names.ipv4OnlyAsks().map(\.name).allSatisfy { $0 == "origin.netcond.test" })
    }

    @Test func anIPv6OnlyRunsDNS64AnswersOtherNamesFromThisMachinesLookups() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let dns64 = IPv6OnlySpec()
        let lookUp: @Sendable (String, Int32) -> [[UInt8]]? = { name, family in
            switch (name, family) {
            case ("v4.example", AF_INET): return [[192, 0, 2, 7]]
            case ("both.example", AF_INET): return [[192, 0, 2, 8]]
            case ("both.example", AF_INET6): return [[0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1]]
            // getaddrinfo's AF_INET6 answer for an IPv4-only name may be IPv4-mapped: not IPv6.
            case ("v4.example", AF_INET6): return [[UInt8](repeating: 0, count: 10) + [0xff, 0xff, 192, 0, 2, 7]]
            default: return nil
            }
        }
        func ask(_ name: String, type: UInt8) async throws -> [UInt8] {
            let query = try #require(PacketDNSResponder.Query(Self.query(name, type: type)))
            return try await PacketDNSResponder.forwarded(query, dns64: dns64, loop: loop, lookUp: lookUp).get()
        }
        #expect(
            DNSAnswers.parse(try await ask("v4.example", type: 28))?.mappings.map(\.address) == ["64:ff9b::c000:207"])
        #expect(DNSAnswers.parse(try await ask("both.example", type: 28))?.mappings.map(\.address) == ["2001:db8::1"])
        let a = try await ask("v4.example", type: 1)
        #expect(a[3] & 0x0f == 0 && a[7] == 0, "no A record on an IPv6-only network")
        #expect(try await ask("gone.invalid", type: 28)[3] & 0x0f == 3, "no such name")
        // Beyond the bound of lookups under way: "server failure" at once, and the count kept.
        let full = NIOLockedValueBox(PacketDNSResponder.lookupBound)
        let query = try #require(PacketDNSResponder.Query(Self.query("v4.example", type: 28)))
        let refused = try await PacketDNSResponder.forwarded(
            query, dns64: dns64, loop: loop, lookUp: lookUp, underWay: full
        ).get()
        #expect(refused[3] & 0x0f == 2 && full.withLockedValue { $0 } == PacketDNSResponder.lookupBound)
        let one = NIOLockedValueBox(0)
        _ = try await PacketDNSResponder.forwarded(query, dns64: dns64, loop: loop, lookUp: lookUp, underWay: one).get()
        #expect(one.withLockedValue { $0 } == 0, "a lookup done is no longer under way")
    }

    @Test func anIPv6OnlyRunsHostsFileGivesTheMachinesIPv4NamesInThePrefix() {
        let machine = "127.0.0.1 localhost\n# a comment 10.0.0.1\n192.0.2.10\tbuild-server build\n::1 ip6-localhost\n"
        let synthesized = PacketSession.synthesizedHosts(machine, IPv6OnlySpec())
        #expect(
            synthesized
                == "127.0.0.1 localhost\n# a comment 10.0.0.1\n64:ff9b::c000:20a\tbuild-server build\n::1 ip6-localhost\n"
        )
    }

    @Test func anAQuestionBesideAnAAAAOneIsNoFaultAndOneAloneIs() {
        let second: Int64 = 1_000_000_000
        let asks: [(name: String, ipv4: Bool, at: Int64)] = [
            ("origin.netcond.test", false, 10 * second), ("origin.netcond.test", true, 10 * second + 1000),
            ("api.netcond.test", true, 12 * second),
            // An AAAA question 4 s later still pairs (a loaded machine); one 6 s later does not.
            ("cdn.netcond.test", true, 20 * second), ("cdn.netcond.test", false, 24 * second),
            ("img.netcond.test", true, 30 * second), ("img.netcond.test", false, 36 * second),
        ]
        let alone = PacketNames.ipv4Only(asks)
        #expect(alone.map(\.name) == ["api.netcond.test", "img.netcond.test"])
        #expect(alone.map(\.at) == [12 * second, 30 * second])
    }

    @Test func anIPv6OnlyRunsResolvConfNamesTheDNS64AloneAndKeepsSearchAndOptions() {
        let machine = "search corp.example\nnameserver 10.0.0.53\nnameserver fd00::53\noptions ndots:2\n"
        let text = PacketNames.resolvConf(responder: "64:ff9b::7f6e:304", machine: machine, ipv6Only: true)
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(lines == ["nameserver 64:ff9b::7f6e:304", "search corp.example", "options ndots:2"])
        #expect(!PacketNames.resolvConf(responder: "64:ff9b::1", machine: "", ipv6Only: true).contains("127.0.0.1"))
    }
}

/// A run's addressing holds from start to end: a switch into or out of `ipv6_only`, or to a
/// captive portal on an IPv6-only run, is refused with the reason (a scenario before it runs, the
/// control API live).
@Suite struct PacketAddressingTests {
    @Test func aSwitchMustAgreeOnIPv6OnlyAndBringNoPortalToAnIPv6OnlyRun() throws {
        var ipv6 = Profile(name: "v6")
        ipv6.ipv6Only = IPv6OnlySpec()
        let dual = Profile(name: "lte")
        #expect(PacketSession.addressingProblem(run: dual, switchingTo: dual) == nil)
        #expect(PacketSession.addressingProblem(run: ipv6, switchingTo: ipv6) == nil)
        let into = try #require(PacketSession.addressingProblem(run: dual, switchingTo: ipv6))
        #expect(into.contains("profile v6 is ipv6_only and the run's profile lte has IPv4"))
        #expect(
            PacketSession.addressingProblem(run: ipv6, switchingTo: dual)?.contains("allowed: profiles that agree")
                == true)
        var portal = ipv6
        portal.name = "hotel"
        portal.captivePortal = CaptivePortalSpec()
        #expect(
            PacketSession.addressingProblem(run: ipv6, switchingTo: portal)
                == "profile hotel has a captive portal, which an IPv6-only run does not build yet")
    }
}
