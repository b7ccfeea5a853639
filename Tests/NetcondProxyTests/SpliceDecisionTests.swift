import CNetcondSystem
import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

#if canImport(Glibc)
import Glibc
#endif

/// When a forward's connection may be spliced (nothing sees or shapes its bytes), and what a relay
/// hands back: its sockets, and the bytes in its pipes in order.
@Suite struct SpliceDecisionTests {
    @Test func aPassThroughLinkWithNothingWatchingSplices() {
        #expect(SpliceDecision.refusal(SpliceDecision.Conditions()) == nil)
    }

    @Test func anythingThatSeesOrShapesTheBytesRefusesIt() {
        let changes: [(inout SpliceDecision.Conditions) -> Void] = [
            { $0.enabled = false },
            { $0.profileIsPassThrough = false },
            { $0.linkIsTransparent = false },
            { $0.faults = 1 },
            { $0.watchedByHook = true },
            { $0.targetIsAddress = false },
            { $0.targetIsOwnListener = true },
            { $0.accepting = false },
            { $0.relays = SpliceDecision.limit },
        ]
        for change in changes {
            var conditions = SpliceDecision.Conditions()
            change(&conditions)
            #expect(SpliceDecision.refusal(conditions) != nil, "\(conditions)")
        }
    }

    @Test func aTargetOnAPortNetcondListensOnIsTakenForItsOwn() throws {
        let target = try SocketAddress(ipAddress: "127.0.0.2", port: 8080)
        let wildcard = try SocketAddress(ipAddress: "0.0.0.0", port: 8080)
        let other = try SocketAddress(ipAddress: "127.0.0.1", port: 8081)
        #expect(SpliceDecision.isOwnListener(target, among: [wildcard]))
        #expect(!SpliceDecision.isOwnListener(target, among: [other]))
    }

    @Test func aProfileWithAnyConditionIsNotPassThrough() throws {
        #expect(try #require(ProfileCatalog.builtin(named: "none")).isPassThrough)
        for name in ["3g", "edge", "lte", "offline"] {
            #expect(try !#require(ProfileCatalog.builtin(named: name)).isPassThrough, "\(name)")
        }
    }

    /// A relay moves bytes both ways; handed back mid-way, its sockets still carry the rest.
    @Test func aRelayHandsBackItsSocketsAndTheBytesInItsPipes() throws {
        let (client, relayClient) = try Self.connectedPair()
        let (relayUpstream, server) = try Self.connectedPair()
        _ = fcntl(relayUpstream, F_SETFL, fcntl(relayUpstream, F_GETFL) | O_NONBLOCK)  // as the relay's are
        let totals = SpliceTotals()
        let started = netcond_relay_start(relayClient, relayUpstream, totals.pointer, { _, _ in }, nil)
        let relay = try #require(started)
        try Self.send(Array("hello".utf8), on: client)
        #expect(try Self.receive(5, on: server) == Array("hello".utf8))
        try Self.send(Array("world".utf8), on: server)
        #expect(try Self.receive(5, on: client) == Array("world".utf8))
        let (handBack, up, down) = RelayHandBack.reclaim(relay)
        let back = try #require(handBack)
        #expect(up == 5 && down == 5 && totals.up == 5 && totals.down == 5)
        #expect(back.up.isEmpty && back.down.isEmpty)
        try Self.send(Array("again".utf8), on: client)
        var got = try Self.receive(5, on: back.clientFD)
        #expect(got == Array("again".utf8))
        try Self.send(got, on: back.upstreamFD)
        got = try Self.receive(5, on: server)
        #expect(got == Array("again".utf8))
        for fd in [client, server, back.clientFD, back.upstreamFD] { close(fd) }
    }

    // MARK: Sockets

    struct SocketError: Error {}

    /// A connected pair of loopback TCP sockets: (connecting end, accepted end, nonblocking).
    static func connectedPair() throws -> (Int32, Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(listener, raw, length) == 0, listen(listener, 1) == 0,
                    getsockname(listener, raw, &length) == 0
                else { throw SocketError() }
            }
        }
        let connecting = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try withUnsafePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard connect(connecting, raw, length) == 0 else { throw SocketError() }
            }
        }
        let accepted = accept(listener, nil, nil)
        guard accepted >= 0 else { throw SocketError() }
        _ = fcntl(accepted, F_SETFL, fcntl(accepted, F_GETFL) | O_NONBLOCK)
        return (connecting, accepted)
    }

    static func send(_ bytes: [UInt8], on fd: Int32) throws {
        let sent = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard sent == bytes.count else { throw SocketError() }
    }

    /// Reads `count` bytes (waiting up to 5 s for them).
    static func receive(_ count: Int, on fd: Int32) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: count)
        for _ in 0..<500 where bytes.count < count {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, 10)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, count - bytes.count) }
            if n > 0 { bytes += buffer[0..<n] } else if n == 0 || errno != EAGAIN { break }
        }
        guard bytes.count == count else { throw SocketError() }
        return bytes
    }
}
