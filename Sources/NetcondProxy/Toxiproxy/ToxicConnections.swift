import NIOCore
import NetcondCore

/// The open connections of one proxy and the toxics they meet; lives on the proxy's loop.
final class ToxicConnections {
    private let seed: UInt64
    private var opened: UInt64 = 0
    private var handlers: [ObjectIdentifier: ToxicConnectionHandler] = [:]
    private var toxics: [Toxic]
    /// The proxy's byte totals, which every connection adds to.
    let tally: ToxicTally

    init(seed: UInt64, toxics: [Toxic], tally: ToxicTally = ToxicTally()) {
        self.seed = seed
        self.toxics = toxics
        self.tally = tally
    }

    /// A new relayed connection (``ToxicRelay``): its wiring, to attach the upstream channel to.
    func attachRelay(to channel: Channel) throws -> ToxicRelayWiring {
        let relay = ToxicRelayWiring(streams: self.nextStreams())
        try self.attach(ToxicConnectionHandler(wiring: relay), to: channel)
        return relay
    }

    /// A new connection of a netcond forward (`--netcond-link`).
    func attachForward(to channel: Channel) throws {
        try self.attach(ToxicConnectionHandler(wiring: ToxicForwardWiring(streams: self.nextStreams())), to: channel)
    }

    func update(_ toxics: [Toxic]) {
        self.toxics = toxics
        for handler in self.handlers.values { handler.update(toxics) }
    }

    /// The next connection's streams, with its own seed.
    private func nextStreams() -> ToxicStreams {
        self.opened += 1
        return ToxicStreams(seed: SeedDeriver.derive(self.seed, self.opened), tally: self.tally)
    }

    /// The handler goes first in the connection's pipeline and meets the toxics in force.
    private func attach(_ handler: ToxicConnectionHandler, to channel: Channel) throws {
        handler.update(self.toxics, opening: true)
        try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        let id = ObjectIdentifier(channel)
        self.handlers[id] = handler
        channel.closeFuture.assumeIsolated().whenComplete { _ in self.handlers[id] = nil }
    }
}
