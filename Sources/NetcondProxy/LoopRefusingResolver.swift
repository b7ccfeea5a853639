import Dispatch
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// An upstream's name resolved as NIO's own resolver resolves it (one `getaddrinfo`, off the event
/// loop, for ``ClientBootstrap``'s Happy Eyeballs), but refused, with no connection made, when an
/// address it gives is one of netcond's own listeners (``ProcessListeners``): `127.0.0.1`,
/// `localhost`, `0.0.0.0`, `[::1]`, `[::ffff:127.0.0.1]`, `127.1` or this host's name, pointed
/// at a proxy's port, are all that proxy. The connect then fails with ``LoopRefusingResolver/Loop``
/// as its lookup's error (``loop(in:)``).
final class LoopRefusingResolver: Resolver, Sendable {
    /// The upstream is `listener`, one of netcond's own.
    struct Loop: Error {
        let listener: SocketAddress
    }

    /// The name does not resolve (`getaddrinfo`'s reason).
    struct NotFound: Error {
        let host: String
        let reason: String
    }

    private let loop: EventLoop
    private let listeners: [SocketAddress]
    private let v4: EventLoopPromise<[SocketAddress]>
    private let v6: EventLoopPromise<[SocketAddress]>

    init(loop: EventLoop, listeners: [SocketAddress]) {
        self.loop = loop
        self.listeners = listeners
        self.v4 = loop.makePromise()
        self.v6 = loop.makePromise()
    }

    /// The loop a failed connect through this resolver (or ``connect(_:host:port:refusing:on:)``)
    /// met, if that is why it failed.
    static func loop(in error: Error) -> Loop? {
        if let loop = error as? Loop { return loop }
        guard let error = error as? NIOConnectionError else { return nil }
        return (error.dnsAAAAError as? Loop) ?? (error.dnsAError as? Loop)
    }

    /// Connects `bootstrap` to `host:port` unless that is one of `listeners` (then it fails with
    /// ``Loop``, no connection made). An address literal is checked here and connected to at once:
    /// no lookup, no hop to another thread and back, which thousands of connections opened at once
    /// would each pay. A name, or an address whose port a listener on every address has (this
    /// host's addresses are needed then), goes through the resolver.
    static func connect(
        _ bootstrap: ClientBootstrap, host: String, port: Int, refusing listeners: [SocketAddress],
        on loop: EventLoop
    ) -> EventLoopFuture<Channel> {
        let wildcard = listeners.contains { listener in
            listener.port == port && (listener.ipAddress == "0.0.0.0" || listener.ipAddress == "::")
        }
        guard !wildcard, let address = try? SocketAddress(ipAddress: host, port: port) else {
            return bootstrap.resolver(LoopRefusingResolver(loop: loop, listeners: listeners))
                .connect(host: host, port: port)
        }
        if let listener = ProcessListeners.listener(reachedByAddress: address, hostAddresses: [], among: listeners) {
            return loop.makeFailedFuture(Loop(listener: listener))
        }
        return bootstrap.connect(to: address)
    }

    /// Answered by the lookup `initiateAAAAQuery` starts (Happy Eyeballs asks for both).
    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        self.v4.futureResult
    }

    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        DispatchQueue.global().async {
            let result = Result { try self.resolve(host: host, port: port) }
            // Both in the same tick, as NIO's resolver answers.
            self.loop.execute {
                self.v6.completeWith(result.map(\.v6))
                self.v4.completeWith(result.map(\.v4))
            }
        }
        return self.v6.futureResult
    }

    func cancelQueries() {}

    private func resolve(host: String, port: Int) throws -> (v4: [SocketAddress], v6: [SocketAddress]) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var info: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &info)
        guard status == 0, let first = info else {
            throw NotFound(host: host, reason: status == 0 ? "no address" : String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(first) }
        var v4: [SocketAddress] = []
        var v6: [SocketAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let entry = next {
            if let address = entry.pointee.ai_addr {
                switch entry.pointee.ai_family {
                case AF_INET: v4.append(SocketAddress(UnsafeRawPointer(address).load(as: sockaddr_in.self), host: host))
                case AF_INET6:
                    v6.append(SocketAddress(UnsafeRawPointer(address).load(as: sockaddr_in6.self), host: host))
                default: break
                }
            }
            next = entry.pointee.ai_next
        }
        let hostAddresses = self.hostAddresses(port: port)
        for address in v6 + v4 {
            if let listener = ProcessListeners.listener(
                reachedByAddress: address, hostAddresses: hostAddresses, among: self.listeners)
            {
                throw Loop(listener: listener)
            }
        }
        return (v4, v6)
    }

    /// This host's addresses, when a listener on every address has this port (a connection to any
    /// of them reaches it); else none are needed.
    private func hostAddresses(port: Int) -> Set<String> {
        let wildcard = self.listeners.contains { listener in
            listener.port == port && (listener.ipAddress == "0.0.0.0" || listener.ipAddress == "::")
        }
        guard wildcard, let devices = try? System.enumerateDevices() else { return [] }
        return Set(devices.compactMap { $0.address?.ipAddress.map(ProcessListeners.plainIP) })
    }
}
