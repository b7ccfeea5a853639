import NIOConcurrencyHelpers
import NIOCore

/// Every listener of this process that a proxied connection must not reach: each proxy port and
/// forward (of every ``ProxyServer`` and Toxiproxy proxy), which would be a loop, and each JSON API
/// (control, Toxiproxy), which only this host's clients may reach, through a proxy as directly.
/// One list, so that two proxies pointed at each other, or a proxy pointed at the API, are caught
/// whichever server they belong to.
///
/// A loop is refused at three points, all from this list:
/// - before a connect, from the addresses the target resolves to (``LoopRefusingResolver``, a
///   Toxiproxy proxy's: `127.0.0.1`, `localhost`, `0.0.0.0`, `[::1]`, `[::ffff:127.0.0.1]`, this
///   host's name): no connection is made;
/// - once a connection is made, from the addresses the kernel gave it (``listener(reachedBy:among:)``:
///   what the lookup could not tell, as a redirect);
/// - as that connection arrives at the listener it reached: it was noted (``noteLoop(_:)``), and
///   the listener recognises it by its address pair (``arrivesFromLoop(_:)``) and resets it
///   instead of relaying it on, round again.
public enum ProcessListeners {
    public enum Kind: Sendable {
        case proxy
        case api
    }

    private struct Listener {
        var address: SocketAddress
        var kind: Kind
        var name: String?
    }

    private static let all = NIOLockedValueBox<[Listener]>([])
    /// Netcond's own outbound connections found to reach one of these listeners, (their local
    /// address, their remote address), until their arrival is seen (at most `loopsKept`, the
    /// oldest dropped).
    private static let loops = NIOLockedValueBox<[(local: SocketAddress, remote: SocketAddress)]>([])
    private static let loopsKept = 256

    /// `name`: what the listener is, for a message (`Toxiproxy proxy redis`, `the control API`).
    static func add(_ address: SocketAddress, _ kind: Kind, name: String? = nil) {
        self.all.withLockedValue { $0.append(Listener(address: address, kind: kind, name: name)) }
    }

    static func remove(_ address: SocketAddress) {
        self.all.withLockedValue { list in
            if let index = list.firstIndex(where: { $0.address == address }) { list.remove(at: index) }
        }
    }

    static func addresses(_ kind: Kind) -> [SocketAddress] {
        self.all.withLockedValue { list in list.filter { $0.kind == kind }.map(\.address) }
    }

    /// The listeners a client at `peer` may not reach through a proxy: every proxy's (a loop), and
    /// for a client from another host also the APIs.
    static func refused(to peer: SocketAddress?) -> [SocketAddress] {
        ProxyServer.listenersRefused(to: peer, own: self.addresses(.proxy), localOnly: self.addresses(.api))
    }

    /// The listener at `address`, as a message names it: its name, else its address.
    static func describe(_ address: SocketAddress) -> String {
        let name = self.all.withLockedValue { list in list.first { $0.address == address }?.name }
        let shown = address.ipAddress.map { ip in
            ip.contains(":") ? "[\(ip)]:\(address.port ?? 0)" : "\(ip):\(address.port ?? 0)"
        }
        return [name, shown].compactMap { $0 }.joined(separator: " at ")
    }

    // MARK: - Loops

    /// The one of `listeners` that a connect to `address` would reach (a resolved upstream, before
    /// any connect): the same address, an IPv4-mapped IPv6 one as the IPv4 one, the unspecified
    /// address as this host (Linux connects it to loopback), and for a listener on every address
    /// any loopback address or one of `hostAddresses` (this host's).
    static func listener(
        reachedByAddress address: SocketAddress, hostAddresses: Set<String>, among listeners: [SocketAddress]
    ) -> SocketAddress? {
        guard let ip = address.ipAddress.map(Self.plainIP), let port = address.port else { return nil }
        let target = ip == "0.0.0.0" ? "127.0.0.1" : ip == "::" ? "::1" : ip
        return self.listener(at: target, port: port, thisHost: hostAddresses, among: listeners)
    }

    /// The one of `listeners` this connection reached: whatever its target was called, a request
    /// sent on would come back to netcond, and round again.
    static func listener(reachedBy channel: Channel, among listeners: [SocketAddress]) -> SocketAddress? {
        guard let remote = channel.remoteAddress, let remoteIP = remote.ipAddress, let port = remote.port else {
            return nil
        }
        let local = channel.localAddress?.ipAddress.map(Self.plainIP)
        return self.listener(
            at: Self.plainIP(remoteIP), port: port, thisHost: Set([local].compactMap { $0 }), among: listeners)
    }

    private static func listener(at ip: String, port: Int, thisHost: Set<String>, among listeners: [SocketAddress])
        -> SocketAddress?
    {
        listeners.first { listener in
            guard listener.port == port, let listenIP = listener.ipAddress.map(Self.plainIP) else { return false }
            if listenIP == ip { return true }
            // A listener on every address takes connections to any address of this host.
            let wildcard = listenIP == "0.0.0.0" || listenIP == "::"
            return wildcard && (thisHost.contains(ip) || ip.hasPrefix("127.") || ip == "::1")
        }
    }

    /// An IPv4-mapped IPv6 address as the IPv4 address it is.
    static func plainIP(_ ip: String) -> String {
        let lower = ip.lowercased()
        if lower.hasPrefix("::ffff:"), lower.dropFirst(7).contains("."), !lower.dropFirst(7).contains(":") {
            return String(lower.dropFirst(7))
        }
        return lower
    }

    /// This outbound connection of netcond's reached `listener`, one of its own (it is being
    /// closed): its arrival there, at a proxy's listener, is to be reset, not relayed on.
    static func noteLoop(_ channel: Channel, reached listener: SocketAddress) {
        guard let local = channel.localAddress, let remote = channel.remoteAddress,
            self.all.withLockedValue({ list in list.contains { $0.address == listener && $0.kind == .proxy } })
        else { return }
        self.loops.withLockedValue { loops in
            loops.append((local, remote))
            if loops.count > Self.loopsKept { loops.removeFirst(loops.count - Self.loopsKept) }
        }
    }

    /// True when this connection, just accepted by one of netcond's listeners, comes from one of
    /// netcond's own outbound connections that was found to loop (its remote address is that
    /// connection's local one, and the other way round): it is to be reset, not relayed on.
    static func arrivesFromLoop(_ channel: Channel) -> Bool {
        guard let peer = channel.remoteAddress, let local = channel.localAddress else { return false }
        return self.loops.withLockedValue { loops in
            guard let index = loops.firstIndex(where: { Self.same($0.local, peer) && Self.same($0.remote, local) })
            else { return false }
            loops.remove(at: index)
            return true
        }
    }

    /// The same address and port, an IPv4-mapped IPv6 address as the IPv4 one (a connection from
    /// an IPv6 socket to `[::ffff:127.0.0.1]` arrives at an IPv4 listener from 127.0.0.1).
    private static func same(_ a: SocketAddress, _ b: SocketAddress) -> Bool {
        guard let ipA = a.ipAddress, let ipB = b.ipAddress else { return false }
        return a.port == b.port && Self.plainIP(ipA) == Self.plainIP(ipB)
    }
}
