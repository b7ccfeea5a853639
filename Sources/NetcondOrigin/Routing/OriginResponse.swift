import NIOCore
import NIOHTTP1
import NetcondCore

/// What a call to a POST endpoint did.
public enum OriginEffect: Hashable, Sendable {
    /// It created object `id` (numbered from 1 per endpoint).
    case created(Int)
    /// Its `Idempotency-Key` was seen before: it answered object `id` again and created nothing.
    case replayed(Int)
}

/// What an endpoint answers: status, headers, a description of the body, and an optional wait before answering.
///
/// It is a plain value — the handler turns it into writes. A generated body is only a (stream, range) pair; the
/// handler produces its bytes chunk by chunk while the channel is writable.
struct OriginResponse: Equatable, Sendable {
    enum Body: Equatable, Sendable {
        /// No body bytes (HEAD, 204, 304, or a deliberately empty body).
        case none
        /// Small, fully built body.
        case buffer(ByteBuffer)
        /// Bytes `range` of a deterministic stream, generated on demand.
        case generated(DeterministicBytes, range: Range<Int64>)

        /// Number of body bytes this describes.
        var count: Int64 {
            switch self {
            case .none: return 0
            case .buffer(let buffer): return Int64(buffer.readableBytes)
            case .generated(_, let range): return range.upperBound - range.lowerBound
            }
        }
    }

    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: Body
    /// Wait this long (on the channel's event loop) before sending anything.
    var delay: Span?
    /// A cut mid-body: send only this many body bytes, then end the connection (FIN or reset).
    struct Cut: Equatable, Sendable {
        var after: Int64
        var end: FaultAction.CutEnd
    }

    /// Send only so many body bytes, then end the connection.
    var cut: Cut?
    /// After the whole response, keep the connection open this long, then close it.
    var slowClose: Span?
    /// Never answer: the connection stays open, silent, until the client goes away.
    var hang = false
    /// Do the work, then close the connection without answering (the response is lost).
    var dropResponse = false
    /// The origin fault that hit the request, if any (logged with it).
    var fault: FaultAction?
    /// A POST's side effect: the object it created, or the earlier one it replayed (same `Idempotency-Key`).
    var effect: OriginEffect?

    init(status: HTTPResponseStatus, headers: HTTPHeaders = [:], body: Body = .none, delay: Span? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delay = delay
    }

    /// A plain-text response with `Content-Type` and `Content-Length` set.
    static func text(_ status: HTTPResponseStatus, _ text: String, headers: HTTPHeaders = [:]) -> OriginResponse {
        Self.small(status, contentType: "text/plain; charset=utf-8", text, headers: headers)
    }

    /// A JSON response with `Content-Type` and `Content-Length` set.
    static func json(_ status: HTTPResponseStatus, _ json: String, headers: HTTPHeaders = [:]) -> OriginResponse {
        Self.small(status, contentType: "application/json", json, headers: headers)
    }

    /// A response with no body and no framing headers (for statuses that cannot carry a body: 204, 304).
    static func empty(_ status: HTTPResponseStatus, headers: HTTPHeaders = [:]) -> OriginResponse {
        OriginResponse(status: status, headers: headers)
    }

    private static func small(
        _ status: HTTPResponseStatus, contentType: String, _ text: String, headers: HTTPHeaders
    ) -> OriginResponse {
        var all = headers
        let buffer = ByteBuffer(string: text)
        all.replaceOrAdd(name: "Content-Type", value: contentType)
        all.replaceOrAdd(name: "Content-Length", value: String(buffer.readableBytes))
        return OriginResponse(status: status, headers: all, body: .buffer(buffer))
    }
}
