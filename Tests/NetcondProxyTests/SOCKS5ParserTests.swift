import Testing

@testable import NetcondProxy

@Suite struct SOCKS5ParserTests {
    @Test func greetingThenDomainConnect() {
        var parser = SOCKS5Parser()
        #expect(parser.feed([5, 1, 0]) == [.reply([5, 0], close: false)])
        let name = Array("origin.netcond.test".utf8)
        let request: [UInt8] = [5, 1, 0, 3, UInt8(name.count)] + name + [0, 80]
        #expect(
            parser.feed(request + [1, 2]) == [
                .connect(UpstreamTarget(host: "origin.netcond.test", port: 80), leftover: [1, 2])
            ])
    }

    @Test func bytesMayArriveOneAtATime() {
        var parser = SOCKS5Parser()
        var steps: [SOCKS5Parser.Step] = []
        for byte: UInt8 in [5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0x1F, 0x90] {
            steps += parser.feed([byte])
        }
        #expect(
            steps == [
                .reply([5, 0], close: false), .connect(UpstreamTarget(host: "127.0.0.1", port: 8080), leftover: []),
            ])
    }

    @Test func ipv6Address() {
        var parser = SOCKS5Parser()
        _ = parser.feed([5, 1, 0])
        let steps = parser.feed([5, 1, 0, 4] + [UInt8](repeating: 0, count: 15) + [1] + [0, 22])
        #expect(steps == [.connect(UpstreamTarget(host: "0:0:0:0:0:0:0:1", port: 22), leftover: [])])
    }

    @Test func rejectsWhatItCannotServe() {
        var noAuth = SOCKS5Parser()
        #expect(noAuth.feed([5, 1, 2]) == [.reply([5, 0xFF], close: true)])
        var wrongVersion = SOCKS5Parser()
        #expect(wrongVersion.feed([4, 1]) == [.reply([5, 0xFF], close: true)])
        var bind = SOCKS5Parser()
        _ = bind.feed([5, 1, 0])
        #expect(bind.feed([5, 2, 0, 1, 127, 0, 0, 1, 0, 80]) == [.reply(SOCKS5Parser.failure(7), close: true)])
        var badType = SOCKS5Parser()
        _ = badType.feed([5, 1, 0])
        #expect(badType.feed([5, 1, 0, 9, 0, 0]) == [.reply(SOCKS5Parser.failure(8), close: true)])
        var portZero = SOCKS5Parser()
        _ = portZero.feed([5, 1, 0])
        #expect(portZero.feed([5, 1, 0, 1, 127, 0, 0, 1, 0, 0]) == [.reply(SOCKS5Parser.failure(4), close: true)])
    }
}

@Suite struct UpstreamTargetTests {
    @Test func parsesAuthorities() {
        #expect(
            UpstreamTarget(authority: "example.com:443", defaultPort: nil)
                == UpstreamTarget(host: "example.com", port: 443))
        #expect(
            UpstreamTarget(authority: "example.com", defaultPort: 80) == UpstreamTarget(host: "example.com", port: 80))
        #expect(UpstreamTarget(authority: "[::1]:8080", defaultPort: nil) == UpstreamTarget(host: "::1", port: 8080))
        #expect(UpstreamTarget(authority: "127.0.0.1:1", defaultPort: nil)?.isName == false)
        #expect(UpstreamTarget(authority: "origin.netcond.test:80", defaultPort: nil)?.isName == true)
    }

    @Test func rejectsMalformedAuthorities() {
        for bad in ["", ":80", "host:", "host:0", "host:70000", "host:abc", "[::1", "[::1]x", "bad host:80", "a/b:80"] {
            #expect(UpstreamTarget(authority: bad, defaultPort: nil) == nil, "\(bad)")
        }
        #expect(UpstreamTarget(authority: "example.com", defaultPort: nil) == nil)
    }

    @Test func overridesRouteTestNamesAndRefuseInvalidOnes() throws {
        var overrides = HostOverrides()
        let origin = try SocketAddress(ipAddress: "127.0.0.1", port: 1234)
        overrides.netcondTest = origin
        overrides.exact["origin.netcond.test"] = origin
        #expect(overrides.lookup("ORIGIN.netcond.test.") == .some(origin))
        #expect(overrides.lookup("other.netcond.test") == .some(origin))
        #expect(overrides.lookup("nothing.invalid") == .some(nil))
        #expect(overrides.lookup("example.com") == nil)
        #expect(overrides.lookup("netcond.test.example.com") == nil && overrides.lookup("xnetcond.test") == nil)
    }
}

import NIOCore
