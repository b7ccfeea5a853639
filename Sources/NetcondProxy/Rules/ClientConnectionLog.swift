import NIOCore
import NetcondCore

/// What one client connection to the proxy did, for the event log: whether the proxy ever tried to
/// reach a server for it, and how many bytes went each way between the client and the proxy. A
/// connection whose request the link swallowed (a blackhole) shows as bytes in, no upstream
/// attempt and nothing back: an attempt of the client's that no server ever saw. Loop-confined.
///
/// For connections to netcond's own origin it also keeps how many of the origin's bytes reached
/// the client's socket: when the link cuts a connection (or the client leaves) the origin has
/// counted as sent what still sat in socket buffers and on the link, and the scenario checks need
/// what the client really got.
final class ClientConnectionRecord {
    let id: Int
    let acceptedAt: NIODeadline
    var upstreamAttempted = false
    var bytesFromClient: Int64 = 0
    /// When the client's first bytes reached netcond's socket (nil before, or when not counted): the
    /// moment its first request left, which may be long after it connected (a connection opened
    /// ahead of need).
    var firstBytesAt: NIODeadline?
    /// Something went back to the client.
    var answered = false
    /// Bytes written toward the client (into its link), and how many of them the link delivered
    /// to the client's socket (`LinkShaper` counts both).
    var downWritten: Int64 = 0
    var downDelivered: Int64 = 0
    /// The latest upstream connection to netcond's origin: its local port (what the origin sees as
    /// the peer's port), when it was established, and `downWritten` when the origin's bytes began
    /// (after the proxy's own answer to CONNECT or SOCKS5, see ``originBytesFollow()``).
    var originUpstream: (localPort: Int, connectedAt: NIODeadline, from: Int64)? {
        didSet {
            if oldValue?.localPort != self.originUpstream?.localPort
                || oldValue?.connectedAt != self.originUpstream?.connectedAt
            {
                self.deliverySamples = []
            }
        }
    }
    /// How the link ended the connection, if it did.
    var cut: CutMode?
    /// When the client's FIN reached netcond's socket (it closed, or shut down its sending side):
    /// a request reaching the origin after this was already on the emulated link.
    var clientFINAt: NIODeadline?

    /// Bytes of the latest origin connection that reached the client's socket.
    var deliveredFromOrigin: Int64? {
        self.originUpstream.map { max(0, self.downDelivered - $0.from) }
    }

    /// When the origin's bytes reached the client's socket: (moment, ``deliveredFromOrigin`` then),
    /// one sample per delivery, so that the evidence can tell when each response's last byte
    /// arrived. At most ``maxDeliverySamples``; past that, none (the moments are then unknown).
    private(set) var deliverySamples: [(at: NIODeadline, bytes: Int64)] = []
    static let maxDeliverySamples = 200_000

    func noteDelivered(_ bytes: Int, at now: NIODeadline) {
        self.downDelivered += Int64(bytes)
        guard let delivered = self.deliveredFromOrigin, delivered > 0,
            self.deliverySamples.count < Self.maxDeliverySamples
        else { return }
        // One sample a millisecond at most: a long download keeps about a thousand a second.
        if let last = self.deliverySamples.last, now - last.at < .milliseconds(1) {
            self.deliverySamples[self.deliverySamples.count - 1].bytes = delivered
        } else {
            self.deliverySamples.append((now, delivered))
        }
    }

    /// What goes down from now on is the origin's: the proxy's own reply (`200 Connection
    /// Established`, the SOCKS5 success) has been written.
    func originBytesFollow() {
        self.originUpstream?.from = self.downWritten
        self.deliverySamples = []
    }

    init(id: Int, acceptedAt: NIODeadline) {
        self.id = id
        self.acceptedAt = acceptedAt
    }

    /// The client sent something, the proxy never went upstream for it, and nothing came back.
    var wentUnanswered: Bool {
        self.bytesFromClient > 0 && !self.upstreamAttempted && !self.answered
    }
}

/// Notes the bytes a client sends and whether anything went back, at the socket end of the
/// client's pipeline; once something has gone back there is nothing left to learn, and it leaves
/// the pipeline (no cost on the rest of the connection's bytes).
final class ClientByteCounter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let record: ClientConnectionRecord

    init(record: ClientConnectionRecord) {
        self.record = record
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let count = self.unwrapInboundIn(data).readableBytes
        if count > 0 && self.record.firstBytesAt == nil { self.record.firstBytesAt = context.eventLoop.now }
        self.record.bytesFromClient += Int64(count)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let answered = self.unwrapOutboundIn(data).readableBytes > 0
        context.write(data, promise: promise)
        if answered && !self.record.answered {
            self.record.answered = true
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }
}
