import NIOCore
import NIOHTTP1
import NetcondCore

/// netcond's own small answers (errors, the captive portal's pages, the control API) as HTTP/1.1.
extension CannedResponse {
    /// A plain-text answer.
    public static func text(_ status: Int, _ text: String) -> CannedResponse {
        CannedResponse(status: status, headers: [], body: Array(text.utf8), contentType: "text/plain; charset=utf-8")
    }

    /// The head: `Content-Type` and `Content-Length` for the body (none for 204 and 304), the response's own headers, and
    /// `Connection: close` unless the connection is kept alive.
    public func head(keepAlive: Bool) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        if let contentType = self.contentType { headers.add(name: "Content-Type", value: contentType) }
        // 204 and 304 carry no body and so no length (RFC 9110 8.6).
        if self.status != 204 && self.status != 304 {
            headers.add(name: "Content-Length", value: String(self.body.count))
        }
        for (name, value) in self.headers { headers.add(name: name, value: value) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        return HTTPResponseHead(
            version: .http1_1, status: HTTPResponseStatus(statusCode: self.status), headers: headers)
    }

    /// Writes it on a server channel (head, body, end); closes the connection after it unless kept alive.
    public func write(to context: ChannelHandlerContext, keepAlive: Bool) {
        context.write(NIOAny(HTTPServerResponsePart.head(self.head(keepAlive: keepAlive))), promise: nil)
        context.write(
            NIOAny(HTTPServerResponsePart.body(.byteBuffer(context.channel.allocator.buffer(bytes: self.body)))),
            promise: nil)
        let done = context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)))
        if !keepAlive {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }
}
