import NIOConcurrencyHelpers
import NIOCore

/// Every listener of this process that a proxied connection must not reach: each proxy port and
/// forward (of every ``ProxyServer`` and Toxiproxy proxy), which would be a loop, and each JSON API
/// (control, Toxiproxy), which only this host's clients may reach, through a proxy as directly.
/// One list, so that two proxies pointed at each other, or a proxy pointed at the API, are caught
/// whichever server they belong to.
public enum ProcessListeners {
    public enum Kind: Sendable {
        case proxy
        case api
    }

    private static let all = NIOLockedValueBox<[(SocketAddress, Kind)]>([])

    static func add(_ address: SocketAddress, _ kind: Kind) {
        self.all.withLockedValue { $0.append((address, kind)) }
    }

    static func remove(_ address: SocketAddress) {
        self.all.withLockedValue { list in
            if let index = list.firstIndex(where: { $0.0 == address }) { list.remove(at: index) }
        }
    }

    static func addresses(_ kind: Kind) -> [SocketAddress] {
        self.all.withLockedValue { list in list.filter { $0.1 == kind }.map(\.0) }
    }

    /// The listeners a client at `peer` may not reach through a proxy: every proxy's (a loop), and
    /// for a client from another host also the APIs.
    static func refused(to peer: SocketAddress?) -> [SocketAddress] {
        ProxyServer.listenersRefused(to: peer, own: self.addresses(.proxy), localOnly: self.addresses(.api))
    }
}
