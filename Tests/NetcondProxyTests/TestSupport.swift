import NIOCore
import NIOEmbedded
import NetcondCore

@testable import NetcondProxy

extension EmbeddedChannel {
    /// Everything written out of this channel so far, as text (the bytes a peer would have read).
    func outboundText() throws -> String {
        var text = ""
        while var buffer = try self.readOutbound(as: ByteBuffer.self) {
            text += buffer.readString(length: buffer.readableBytes) ?? ""
        }
        return text
    }
}

/// A proxied client connection in virtual time: the client and every upstream are
/// `EmbeddedChannel`s on one `EmbeddedEventLoop`, so the moment each byte and each close happens
/// is exact. With a profile, a `LinkDriver` puts its link between the client and the proxy.
final class ProxyRig {
    let loop = EmbeddedEventLoop()
    let client: EmbeddedChannel
    let rules: ProxyRules
    let driver: LinkDriver?
    var upstreams: [EmbeddedChannel] = []
    /// Real connections the proxy made (each became one of `upstreams`).
    var connectsAttempted = 0

    /// `shaped`: the profile's link is emulated (else bytes pass at once and only its rules apply).
    init(profile: Profile, shaped: Bool) throws {
        let loop = self.loop
        let stats = ProxyStats()
        self.rules = ProxyRules(profile: profile, seed: 1, startedAt: loop.now, eventLoop: loop, tls: nil)
        let driver = shaped ? LinkDriver(profile: profile, seed: 1, eventLoop: loop, epoch: loop.now) : nil
        self.driver = driver
        let record = self.rules.beginClient(at: loop.now)
        var connector = UpstreamConnector(
            eventLoop: loop, driver: driver, overrides: HostOverrides(), stats: stats, rules: self.rules,
            client: record)
        self.client = EmbeddedChannel(loop: loop)
        connector.connectOverride = { [unowned self] _ in
            self.connectsAttempted += 1
            let upstream = EmbeddedChannel(loop: loop)
            _ = upstream.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 80))
            self.upstreams.append(upstream)
            return loop.makeSucceededFuture(upstream)
        }
        let shaper = LinkShaper(driver: driver, stats: stats)
        let sniffer = ProtocolSniffer(shaper: shaper, connector: connector)
        // As the proxy's listener builds it: the byte counter at the socket's end.
        try self.client.pipeline.syncOperations.addHandlers([ClientByteCounter(record: record), shaper, sniffer])
        try self.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50000)).wait()
        precondition(self.client.isActive)
    }

    func advance(_ milliseconds: Int64) {
        self.loop.advanceTime(by: .milliseconds(milliseconds))
    }

    func request(_ method: String = "GET", _ path: String = "/file") throws {
        try self.client.writeInbound(
            ByteBuffer(
                string:
                    "\(method) http://origin.netcond.test\(path) HTTP/1.1\r\nHost: origin.netcond.test\r\nContent-Length: 0\r\n\r\n"
            )
        )
    }

    /// The client sends FIN (it closed its socket, or shut down its sending side).
    func clientCloses() {
        self.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
    }

    /// What the client has received so far.
    func received() throws -> String {
        try self.client.outboundText()
    }

    /// What the upstream has been sent so far.
    func sentUpstream(_ index: Int = 0) throws -> String {
        try self.upstreams[index].outboundText()
    }

    func respond(_ body: String, index: Int = 0, headers: String = "") throws {
        try self.upstreams[index].writeInbound(
            ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\(headers)\r\n\(body)")
        )
    }
}
