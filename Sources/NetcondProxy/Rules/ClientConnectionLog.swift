import NIOCore

/// What one client connection to the proxy did, for the event log: whether the proxy ever tried to
/// reach a server for it, and how many bytes went each way between the client and the proxy. A
/// connection whose request the link swallowed (a blackhole) shows as bytes in, no upstream
/// attempt and nothing back: an attempt of the client's that no server ever saw. Loop-confined.
final class ClientConnectionRecord {
    let id: Int
    let acceptedAt: NIODeadline
    var upstreamAttempted = false
    var bytesFromClient: Int64 = 0
    var bytesToClient: Int64 = 0

    init(id: Int, acceptedAt: NIODeadline) {
        self.id = id
        self.acceptedAt = acceptedAt
    }

    /// The client sent something, the proxy never went upstream for it, and nothing came back.
    var wentUnanswered: Bool {
        self.bytesFromClient > 0 && !self.upstreamAttempted && self.bytesToClient == 0
    }
}

/// Counts the bytes between a client and the proxy, at the socket end of the client's pipeline.
final class ClientByteCounter: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let record: ClientConnectionRecord

    init(record: ClientConnectionRecord) {
        self.record = record
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.record.bytesFromClient += Int64(self.unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.record.bytesToClient += Int64(self.unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }
}
