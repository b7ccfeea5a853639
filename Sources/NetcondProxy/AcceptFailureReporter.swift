import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Says on stderr when a listener cannot accept for lack of file descriptors, at most once every
/// 10 s: otherwise clients wait in the backlog with no word why. NIO's `AcceptBackoffHandler`
/// after it pauses accepting meanwhile.
final class AcceptFailureReporter: ChannelInboundHandler {
    typealias InboundIn = Channel

    private var lastReport: NIODeadline?
    private var missed = 0
    static let interval = TimeAmount.seconds(10)

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let error = error as? IOError, error.errnoCode == EMFILE || error.errnoCode == ENFILE {
            let now = NIODeadline.now()
            if let last = self.lastReport, now - last < Self.interval {
                self.missed += 1
            } else {
                let limit = SpliceDecision.processDescriptorLimit().map { "\($0)" } ?? "unknown"
                let which = error.errnoCode == EMFILE ? "this process's limit of \(limit)" : "the system's limit"
                let address =
                    context.channel.localAddress.flatMap { local in
                        local.ipAddress.map { " on \($0.contains(":") ? "[\($0)]" : $0):\(local.port ?? 0)" }
                    } ?? ""
                let again = self.missed > 0 ? " (\(self.missed) more since the last report)" : ""
                let line =
                    "netcond: cannot accept connections\(address): out of file descriptors (\(which))\(again); "
                    + "clients wait until some close. Raise the limit (ulimit -n) or close idle connections.\n"
                let bytes = Array(line.utf8)
                _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
                self.lastReport = now
                self.missed = 0
            }
        }
        context.fireErrorCaught(error)
    }
}

extension ServerBootstrap {
    /// The listen queue asked for: the kernel gives `net.core.somaxconn` at most (4,096 by default
    /// since Linux 5.4), as Go's listeners (Toxiproxy's) ask for. A shorter queue drops the SYNs of
    /// thousands of clients connecting at once, and each waits out a one-second retransmission.
    static let listenBacklog: Int32 = 65535

    /// The loop a listener whose connections live on `loop` accepts on: another of the process's
    /// shared loops when there is one, so that a burst of clients is taken off the listen queue
    /// while `loop` sets up the connections before them (as Go's accept loop runs beside its
    /// connections); `loop` itself on a machine with one core.
    static func acceptLoop(besides loop: EventLoop) -> EventLoop {
        for candidate in MultiThreadedEventLoopGroup.singleton.makeIterator() where candidate !== loop {
            return candidate
        }
        return loop
    }

    /// A listener as netcond's proxies and forwards have one: its connections on `loop`, accepted
    /// on a loop beside it (``acceptLoop(besides:)``); accepting pauses (and says so) when
    /// descriptors run out; the longest listen queue the kernel allows, up to 256 connections
    /// accepted per wake-up (NIO's default is 4), the address reusable at once, a client's
    /// half-close seen as one, no Nagle delay on the client's side.
    static func proxyListener(on loop: EventLoop) -> ServerBootstrap {
        ServerBootstrap(group: Self.acceptLoop(besides: loop), childGroup: loop)
            .serverChannelInitializer { channel in
                // Out of descriptors: pause accepting for a moment instead of spinning on EMFILE.
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([AcceptFailureReporter(), AcceptBackoffHandler()])
                }
            }
            .serverChannelOption(.backlog, value: Self.listenBacklog)
            .serverChannelOption(.maxMessagesPerRead, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
    }
}
