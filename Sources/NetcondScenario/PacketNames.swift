import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// The names a packet-engine run maps to addresses of its own: `origin.netcond.test` and the
/// portal's names (fixed at the start), and every other name under `netcond.test` the command asks
/// its DNS responder for (``PacketDNSResponder``), each given, the first time, an address of its
/// own in 127.110.0.0/16 on which the built-in origin listens too (HTTP on 80, HTTPS on 443). The
/// packet engine tells destinations apart by address, so two names never share one; a name keeps
/// its address for the run.
final class PacketNames: Sendable {
    /// Names the responder gives addresses of their own, at most (each costs two listeners).
    static let limit = 64
    /// Addresses tried for one name before its lookup fails (other runs may hold some).
    static let triesPerName = 16

    enum Lookup: Hashable {
        case address(String)
        /// No address could be given (the limit reached, or no free address found).
        case failed
    }

    private struct State {
        var known: [(name: String, address: String)]
        /// The names the responder gave addresses, with them (the origin listens on each).
        var given: [(name: String, address: String)] = []
        /// Lookups under way (their listeners binding), so that a second query waits for the first.
        var pending: [String: EventLoopFuture<Lookup>] = [:]
        /// Names given an address or being given one: what counts against ``PacketNames/limit``.
        var reserved = 0
        var next: Int
        var limitNoted = false
        /// An IPv6-only run's: the questions DNS64 was asked for its names, A (answered with no
        /// address) and AAAA, with their moments (CLOCK_MONOTONIC nanoseconds), at most 1,000.
        var asks: [(name: String, ipv4: Bool, at: Int64)] = []
    }

    private let state: NIOLockedValueBox<State>
    private let loop: EventLoop
    /// Binds the origin's HTTP and HTTPS listeners on an address; throws when one is taken.
    private let listen: @Sendable (String) async throws -> Void

    /// `fixed`: the session's own names (the origin's, the portal's). Allocations run on `loop`.
    init(
        fixed: [(name: String, address: String)], loop: EventLoop,
        listen: @escaping @Sendable (String) async throws -> Void
    ) {
        self.state = NIOLockedValueBox(State(known: fixed, next: Int.random(in: 0...0xffff)))
        self.loop = loop
        self.listen = listen
    }

    /// DNS64 was asked for `name`'s IPv4 address (A: it gives none) or its IPv6 one (AAAA).
    func noteAsk(_ name: String, ipv4: Bool) {
        let at = Int64(DispatchTime.now().uptimeNanoseconds)
        self.state.withLockedValue { if $0.asks.count < 1000 { $0.asks.append((name, ipv4, at)) } }
    }

    /// The lookups that asked only for IPv4 (``ipv4Only(_:)``), in order.
    func ipv4OnlyAsks() -> [(name: String, at: Int64)] {
        Self.ipv4Only(self.state.withLockedValue { $0.asks })
    }

    /// Each A question with no AAAA question for the same name within 5 s either side: a
    /// dual-stack lookup asks both at once (glibc sends them together), and is no fault; 5 s so
    /// that a loaded machine's delays never make one look like an IPv4-only lookup.
    static func ipv4Only(_ asks: [(name: String, ipv4: Bool, at: Int64)]) -> [(name: String, at: Int64)] {
        let window: Int64 = 5_000_000_000
        return asks.filter { ask in
            ask.ipv4 && !asks.contains { !$0.ipv4 && $0.name == ask.name && abs($0.at - ask.at) <= window }
        }.map { ($0.name, $0.at) }
    }

    /// Every name the session mapped and its address, in the order they were given: what the
    /// command can have learnt from the hosts file and from the responder. Safe from any thread.
    func knownNames() -> [(name: String, address: String)] {
        self.state.withLockedValue { $0.known }
    }

    /// The names the responder gave addresses of their own, with them: each reaches the origin.
    func givenNames() -> [(name: String, address: String)] {
        self.state.withLockedValue { $0.given }
    }

    /// The address of `name` (lower case, no final dot), given on its first lookup.
    func lookup(_ name: String) -> EventLoopFuture<Lookup> {
        let (future, promise) = self.state.withLockedValue {
            state -> (EventLoopFuture<Lookup>, EventLoopPromise<Lookup>?) in
            if let known = state.known.first(where: { $0.name == name }) {
                return (self.loop.makeSucceededFuture(.address(known.address)), nil)
            }
            if let pending = state.pending[name] { return (pending, nil) }
            let promise = self.loop.makePromise(of: Lookup.self)
            state.pending[name] = promise.futureResult
            return (promise.futureResult, promise)
        }
        if let promise { promise.completeWithTask { await self.give(name) } }
        return future
    }

    /// Finds `name` a free address and starts the origin's listeners on it.
    private func give(_ name: String) async -> Lookup {
        let taken = self.state.withLockedValue { state -> Set<String>? in
            guard state.reserved < Self.limit else {
                state.pending[name] = nil
                return nil
            }
            state.reserved += 1
            return Set(state.known.map(\.address))
        }
        guard let taken else {
            self.noteLimit(name)
            return .failed
        }
        for _ in 0..<Self.triesPerName {
            let address = self.nextAddress(avoiding: taken)
            do {
                try await self.listen(address)
            } catch {
                continue
            }
            self.state.withLockedValue {
                $0.known.append((name, address))
                $0.given.append((name, address))
                $0.pending[name] = nil
            }
            return .address(address)
        }
        self.state.withLockedValue {
            $0.reserved -= 1
            $0.pending[name] = nil
        }
        return .failed
    }

    /// The next address of 127.110.0.0/16 in this run's walk (a prime step visits them all), never
    /// one the run holds, nor one ending in 0 or 255.
    private func nextAddress(avoiding taken: Set<String>) -> String {
        self.state.withLockedValue { state in
            while true {
                state.next = (state.next &+ 7919) & 0xffff
                let low = state.next & 0xff
                let address = "127.110.\(state.next >> 8).\(low)"
                if low != 0 && low != 255 && !taken.contains(address) { return address }
            }
        }
    }

    private func noteLimit(_ name: String) {
        let first = self.state.withLockedValue { state in
            defer { state.limitNoted = true }
            return !state.limitNoted
        }
        guard first else { return }
        FileHandle.standardError.write(
            Data(
                ("netcond: the packet engine gives at most \(Self.limit) names under \(OriginHost.domain) an address "
                    + "of their own; \(name) and any further new name get SERVFAIL (use fewer names, or "
                    + "\(OriginHost.name) with paths)\n").utf8))
    }

    /// The command's /etc/resolv.conf: this run's responder first, then the machine's file as it is
    /// (its nameservers, `search` and `options`, less `rotate`, which would send queries for
    /// netcond's names elsewhere), or `nameserver 127.0.0.1` (glibc's default) when it names none.
    /// An IPv6-only run's (`ipv6Only`): the responder alone, at its NAT64 address (`responder`
    /// is that), the network's DNS64; the machine's nameservers are left out (IPv4 ones are out of
    /// reach on that network), its `search` and `options` kept.
    static func resolvConf(responder: String, machine: String, ipv6Only: Bool = false) -> String {
        var text =
            ipv6Only
            ? "# netcond: an IPv6-only network: this run's DNS64 answers every name, IPv4 addresses in its "
                + "NAT64 prefix\nnameserver \(responder)\n"
            : "# netcond: names under \(OriginHost.domain) are answered by this run's own DNS responder; "
                + "it refuses the rest, which go to the machine's nameservers below\nnameserver \(responder)\n"
        var nameservers = 0
        for line in machine.split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if words.first == "nameserver" { nameservers += 1 }
            if ipv6Only && words.first == "nameserver" { continue }
            if words.first == "options", words.contains("rotate") {
                text += words.filter { $0 != "rotate" }.joined(separator: " ") + "\n"
            } else {
                text += line + "\n"
            }
        }
        if nameservers == 0 && !ipv6Only { text += "nameserver 127.0.0.1\n" }
        return text
    }
}

/// A packet-engine run's own names beyond its hosts file: the names, the responder that answers
/// for them, and the resolv.conf the command sees naming it.
struct PacketNaming: Sendable {
    let names: PacketNames
    /// Nil when port 53 of the origin's address could not be bound (then the command has the
    /// machine's resolv.conf, and only the hosts file's names reach netcond's servers).
    let responder: PacketDNSResponder?
    /// The command's /etc/resolv.conf (nil: the machine's, when there is no responder or the
    /// machine has no /etc/resolv.conf to put it over).
    let resolvFile: String?

    /// Starts the responder on the origin's address (`host`) and writes the resolv.conf naming it;
    /// a name's listeners are the origin's, HTTPS with `trust`. `fixed`: the names the hosts file
    /// gives.
    static func start(
        origin: OriginServer, group: EventLoopGroup, host: String, trust: OriginTrust,
        fixed: [(name: String, address: String)], dns64: IPv6OnlySpec? = nil
    ) async throws -> PacketNaming {
        let names = PacketNames(fixed: fixed, loop: group.next()) { address in
            let http = try await origin.addListener(group: group, host: address, port: 80, prepare: nil)
            do {
                _ = try await origin.addListener(group: group, host: address, port: 443) { try trust.prepare($0) }
            } catch {
                // The address is given up: its HTTP listener goes too.
                await origin.removeListener(at: http)
                throw error
            }
        }
        let responder: PacketDNSResponder
        do {
            responder = try await PacketDNSResponder.start(host: host, names: names, loop: group.next(), dns64: dns64)
        } catch {
            FileHandle.standardError.write(
                Data(
                    ("netcond: cannot start the packet engine's DNS responder on \(host):53 (\(error)): only "
                        + "\(OriginHost.name) and the portal's names reach netcond's servers; other names under "
                        + "\(OriginHost.domain) will not resolve\n").utf8))
            return PacketNaming(names: names, responder: nil, resolvFile: nil)
        }
        guard access("/etc/resolv.conf", F_OK) == 0 else {
            return PacketNaming(names: names, responder: responder, resolvFile: nil)
        }
        do {
            let file = try TemporaryFiles.makeFile(kind: "resolv")
            do {
                let machine = (try? String(contentsOfFile: "/etc/resolv.conf", encoding: .utf8)) ?? ""
                let address = dns64?.synthesized(text: host) ?? host
                try PacketNames.resolvConf(responder: address, machine: machine, ipv6Only: dns64 != nil).write(
                    toFile: file, atomically: false, encoding: .utf8)
                chmod(file, 0o644)
            } catch {
                unlink(file)
                throw error
            }
            return PacketNaming(names: names, responder: responder, resolvFile: file)
        } catch {
            await responder.stop()
            throw error
        }
    }

    func stop() async {
        await self.responder?.stop()
        if let resolvFile { unlink(resolvFile) }
    }
}
