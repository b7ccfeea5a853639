import CNetcondSystem
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
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
            { $0.descriptorLimit = 400 },
        ]
        for change in changes {
            var conditions = SpliceDecision.Conditions()
            change(&conditions)
            #expect(SpliceDecision.refusal(conditions) != nil, "\(conditions)")
        }
    }

    /// A relay holds 8 descriptors, a connection under NIO 2: near the limit the relays go back
    /// and none starts (bench item 6: 9,900 connections at once under a limit of 20,000, the first
    /// 64 spliced, refused 106 connections their descriptors).
    @Test func nearTheDescriptorLimitNoRelayStartsAndThoseRunningGoBack() {
        var conditions = SpliceDecision.Conditions()
        conditions.descriptorLimit = 20_000
        conditions.relays = 63
        conditions.connections = 9_000
        #expect(!SpliceDecision.descriptorsShort(conditions))  // 18,128 + 384 + 512 = 19,024
        conditions.connections = 9_500
        #expect(SpliceDecision.descriptorsShort(conditions))  // 19,128 + 384 + 512 = 20,024
        #expect(SpliceDecision.refusal(conditions) == "descriptors are short")
        // No limit known: never short.
        #expect(!SpliceDecision.descriptorsShort(SpliceDecision.Conditions()))
    }

    /// Handing the relays back moves their connections among those on the loop: still short, so
    /// the next arrival is not spliced only to go back at the one after (bench item 6 took 14-21 s
    /// for its burst so, against 6 s through netcond's loop alone). Splicing comes back only once
    /// connections close.
    @Test func handingTheRelaysBackLeavesTheDecisionAsItWas() {
        var conditions = SpliceDecision.Conditions()
        conditions.descriptorLimit = 20_000
        conditions.relays = 64
        conditions.connections = 9_488
        #expect(SpliceDecision.descriptorsShort(conditions))  // 2 × 9,553 + 384 + 512 = 20,002
        conditions.relays = 0
        conditions.connections = 9_552
        #expect(SpliceDecision.descriptorsShort(conditions))
        #expect(SpliceDecision.refusal(conditions) == "descriptors are short")
        conditions.connections = 9_551  // one closed: 2 × 9,552 + 896 = 20,000
        #expect(!SpliceDecision.descriptorsShort(conditions))
        #expect(SpliceDecision.refusal(conditions) == nil)
    }

    /// The descriptor of a connection NIO accepted is read from NIO's channel (no API gives it) in
    /// its child initializer, and taken only when its addresses are the channel's: what it carries
    /// reaches the client. Another descriptor, or none, is not taken.
    @Test func anAcceptedConnectionsDescriptorIsReadFromNIOAndCheckedByItsAddresses() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let taken = NIOLockedValueBox<[Int32]>([])
        let server = try ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                var fds: [Int32] = []
                if let descriptor = AcceptedDescriptor.of(channel), let local = channel.localAddress,
                    let peer = channel.remoteAddress
                {
                    fds.append(descriptor)
                    fds.append(
                        local.withSockAddr { local, _ in
                            peer.withSockAddr { peer, _ in netcond_take_socket(descriptor, local, peer) }
                        })
                    // The same addresses the other way round (the client's end) are not this socket.
                    fds.append(
                        local.withSockAddr { local, _ in
                            peer.withSockAddr { peer, _ in netcond_take_socket(descriptor, peer, local) }
                        })
                    fds.append(local.withSockAddr { local, _ in netcond_take_socket(-1, local, local) })
                }
                taken.withLockedValue { $0 = fds }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        defer { try? server.close().wait() }
        let port = try #require(server.localAddress?.port)
        let client = try Self.connectedClient(port: port)
        defer { close(client) }
        var fds: [Int32] = []
        for _ in 0..<200 where fds.isEmpty {
            fds = taken.withLockedValue { $0 }
            if fds.isEmpty { usleep(10_000) }
        }
        try #require(fds.count == 4, "\(fds)")
        #expect(fds[0] >= 0 && fds[1] >= 0 && fds[1] != fds[0])
        #expect(fds[2] == -1 && fds[3] == -1)
        try Self.send(Array("taken".utf8), on: fds[1])
        #expect(try Self.receive(5, on: client) == Array("taken".utf8))
        close(fds[1])
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
        guard case .done(let handBack, let up, let down) = RelayHandBack.reclaim(relay, waitingForConnect: true) else {
            Issue.record("a connected relay was deferred")
            return
        }
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

    /// Asked back while its upstream's connect is under way, a relay does not abandon the connect
    /// (the server would see an empty connection, then another): the hand back is deferred, nothing
    /// is relayed meanwhile, and the relay gives the pair back once the connect is over.
    @Test func aRelayAskedBackWhileConnectingGivesThePairBackOnceConnected() throws {
        let (client, server, filled, relay, ended) = try Self.relayStillConnecting(clientSends: Array("early".utf8))
        guard case .deferred = RelayHandBack.reclaim(relay, waitingForConnect: true) else {
            Issue.record("a relay asked back while connecting did not defer")
            return
        }
        #expect(ended.how == nil)
        _ = try Self.receive(filled, on: server)  // the "connect" is over: writable again
        #expect(ended.wait(seconds: 10) == Int32(NETCOND_RELAY_HANDED_BACK))
        guard case .done(let handBack, let up, let down) = RelayHandBack.reclaim(relay, waitingForConnect: true) else {
            Issue.record("an ended relay was deferred")
            return
        }
        let back = try #require(handBack)
        #expect(up == 0 && down == 0 && back.up.isEmpty && back.down.isEmpty)
        #expect(back.upstreamFD >= 0 && back.connectError == 0 && back.connectFailure == nil)
        // The client's early bytes are still in its socket, for the ordinary path to carry.
        #expect(try Self.receive(5, on: back.clientFD) == Array("early".utf8))
        try Self.send(Array("later".utf8), on: back.upstreamFD)
        #expect(try Self.receive(5, on: server) == Array("later".utf8))
        for fd in [client, server, back.clientFD, back.upstreamFD] { close(fd) }
    }

    /// When netcond stops, a connect under way is not waited for: the client comes back at once.
    @Test func aRelayStoppedWhileConnectingGivesItsClientBackAtOnce() throws {
        let (client, server, _, relay, ended) = try Self.relayStillConnecting(clientSends: [])
        guard case .done(let handBack, _, _) = RelayHandBack.reclaim(relay, waitingForConnect: false) else {
            Issue.record("a relay stopped while connecting was deferred")
            return
        }
        let back = try #require(handBack)
        #expect(back.clientFD >= 0 && back.upstreamFD == -1 && back.connectError == 0)
        #expect(ended.how == Int32(NETCOND_RELAY_HANDED_BACK))
        for fd in [client, server, back.clientFD] { close(fd) }
    }

    /// A relay whose connect is refused gives its client back with the failure, reported as the
    /// ordinary path's own connect reports it (so it answers the client alike, without connecting
    /// again).
    @Test func aRelayWhoseConnectFailsGivesItsClientBackWithTheFailure() throws {
        let (client, relayClient) = try Self.connectedPair()
        var target = try Self.loopback(port: Self.closedPort())
        let upstream = withUnsafePointer(to: &target) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                netcond_connect_socket($0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(upstream >= 0, "a loopback connect reports a refusal later, not at once")
        let totals = SpliceTotals()
        let ended = RelayEnded()
        let started = netcond_relay_start(
            relayClient, upstream, totals.pointer, { context, how in RelayEnded.from(context).end(how) },
            ended.context)
        let relay = try #require(started)
        #expect(ended.wait(seconds: 10) == Int32(NETCOND_RELAY_CONNECT_FAILED))
        guard case .done(let handBack, _, _) = RelayHandBack.reclaim(relay, waitingForConnect: true) else {
            Issue.record("an ended relay was deferred")
            return
        }
        let back = try #require(handBack)
        #expect(back.upstreamFD == -1 && back.connectError == ECONNREFUSED)
        let failure = try #require(back.connectFailure)
        #expect(UpstreamConnector.reason(failure) == "connection refused")
        for fd in [client, back.clientFD] { close(fd) }
    }

    @Test func aRelaysConnectWaitsAsLongAsNetcondsOwn() {
        let timedOut = RelayHandBack(clientFD: -1, upstreamFD: -1, up: [], down: [], connectError: ETIMEDOUT)
        #expect(UpstreamConnector.reason(timedOut.connectFailure!) == "connect timed out")
        #expect(Int64(NETCOND_RELAY_CONNECT_TIMEOUT_MS) * 1_000_000 == UpstreamConnector.connectTimeout.nanoseconds)
    }

    // MARK: Sockets

    /// The totals every test relay adds to (they live as long as the process).
    static let totals = SpliceTotals()

    /// A relay whose upstream socket is not writable yet, as one whose connect is under way (its
    /// send buffer is full: `filled` bytes wait for the server to read), after the client sent
    /// `clientSends`: (client, server, filled, relay, its `ended` call).
    static func relayStillConnecting(
        clientSends: [UInt8]
    ) throws -> (Int32, Int32, Int, OpaquePointer, RelayEnded) {
        let (client, relayClient) = try Self.connectedPair()
        let (relayUpstream, server) = try Self.connectedPair()
        _ = fcntl(relayUpstream, F_SETFL, fcntl(relayUpstream, F_GETFL) | O_NONBLOCK)
        let filled = try Self.fill(relayUpstream)
        if !clientSends.isEmpty { try Self.send(clientSends, on: client) }
        let ended = RelayEnded()
        let started = netcond_relay_start(
            relayClient, relayUpstream, Self.totals.pointer,
            { context, how in RelayEnded.from(context).end(how) }, ended.context)
        return (client, server, filled, try #require(started), ended)
    }

    /// What a relay's `ended` call said (set on the relay's thread).
    final class RelayEnded: @unchecked Sendable {
        private let lock = NSLock()
        private var said: Int32?
        private let signal = DispatchSemaphore(value: 0)

        var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

        static func from(_ context: UnsafeMutableRawPointer?) -> RelayEnded {
            Unmanaged<RelayEnded>.fromOpaque(context!).takeUnretainedValue()
        }

        func end(_ how: Int32) {
            self.lock.withLock { self.said = how }
            self.signal.signal()
        }

        var how: Int32? { self.lock.withLock { self.said } }

        func wait(seconds: Int) -> Int32? {
            self.signal.wait(timeout: .now() + .seconds(seconds)) == .success ? self.how : nil
        }
    }

    /// Writes to a nonblocking socket until its send buffer is full; the bytes written.
    static func fill(_ fd: Int32) throws -> Int {
        let chunk = [UInt8](repeating: 0x2a, count: 65536)
        var total = 0
        for _ in 0..<4096 {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                total += n
            } else if errno == EAGAIN {
                return total
            } else {
                throw SocketError()
            }
        }
        throw SocketError()
    }

    static func loopback(port: UInt16) throws -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }

    /// A loopback port nothing listens on (bound, then closed).
    static func closedPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = try Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(fd, raw, length) == 0, getsockname(fd, raw, &length) == 0 else { throw SocketError() }
            }
        }
        return UInt16(bigEndian: address.sin_port)
    }

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

    /// A blocking client socket connected to 127.0.0.1:`port`.
    static func connectedClient(port: Int) throws -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw SocketError()
        }
        return fd
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
