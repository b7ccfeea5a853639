import NIOCore
import NIOHTTP1
import NetcondCore

/// The rules a request meets before it is forwarded: the captive portal's answer and the HTTP
/// faults (``ProxyRules`` in a run; a stand-in in tests).
protocol HTTPRequestPolicy: AnyObject {
    func captiveAnswer(method: String, host: String, path: String, now: NIODeadline) -> CannedResponse?
    func decide(_ request: FaultRequest, now: NIODeadline) -> FaultAction?
}

extension ProxyRules: HTTPRequestPolicy {}

extension HTTPProxyStateMachine {
    /// What the handler does, in this order.
    enum Action: Equatable {
        /// A request part to the server, flushed when `flush`.
        case forward(HTTPClientRequestPart, flush: Bool)
        case flushUpstream
        /// A response part to the client, flushed when `flush`.
        case write(HTTPServerResponsePart, flush: Bool)
        case flushClient
        /// Make the connection for this request's target.
        case connect(UpstreamTarget)
        /// Make the connection for a `CONNECT` tunnel.
        case openTunnel(UpstreamTarget)
        /// Close the server connection; nothing it does afterwards reaches this machine.
        case closeUpstream
        /// Give up the connection being made (the client left).
        case abandonConnect
        /// Close the client's connection once every byte written before has crossed the link.
        case closeClient(CloseWhenDrained)
        /// Close the client's connection now.
        case closeClientNow
        /// `cut_after` with `end: reset`: these last body bytes, then a TCP reset.
        case writeThenReset(ByteBuffer)
        /// `delay`: hand the held response over at this moment (``releaseHeld()``).
        case releaseAt(NIODeadline)
        /// `slow_close`: close the client's connection (once drained) this much later.
        case closeLater(TimeAmount)
        /// The connection may now wait for a head with no server behind it: restart the idle time-out.
        case rearmIdleTimer
        case cancelIdleTimer
        /// Read the client again if a read was held back.
        case resumeReadingIfPending
        /// Read the server again if the client can take more.
        case resumeUpstreamReading
        /// The server switched protocols: both connections become one byte pipe.
        case switchToTunnel
        /// A response header reached the client altered (bytes that are not UTF-8).
        case noteAlteredHeader(String, host: String)
        /// The server's response was not HTTP the proxy could read (the reason, the server).
        case noteMalformed(String, host: String)
    }

    /// What one request and its response have done so far.
    struct Exchange {
        var keepAlive = true
        /// The server's response said it closes the connection after it (`Connection: close`,
        /// HTTP/1.0): the client sees that close when the server makes it, not sooner.
        var serverCloses = false
        var isHead = false
        var requestEnded = false
        var responseStarted = false
        var responseEnded = false
        var responseStatus: HTTPResponseStatus?
        var responseBodyBytes = 0
        /// The fault applied to this exchange's response, if any.
        var fault: FaultAction?
        /// `delay`: response parts wait in `held` until this moment.
        var responseNotBefore: NIODeadline?
        var held: [HTTPClientResponsePart] = []
        var releaseScheduled = false
        /// The server closed while the response was held: whether with a reset.
        var closedWhileHeld: Bool?
    }
}
