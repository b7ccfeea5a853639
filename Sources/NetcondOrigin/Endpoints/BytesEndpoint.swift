import NIOHTTP1
import NetcondCore

/// `GET /bytes/{size}?seed=N` — a deterministic file of `size` bytes (``DeterministicBytes`` stream `N`), served like
/// a static file: strong ETag `"<size>-<seed>"`, fixed `Last-Modified`, `Range` (206/416), `If-None-Match` and
/// `If-Modified-Since` (304, ``Validators``) and `If-Range`. The body is only described here; the handler generates it chunk by chunk.
///
/// Precedence follows RFC 9110 §13.2.2: If-None-Match, then Range (guarded by If-Range).
struct BytesEndpoint: OriginEndpoint {
    let maximumSize: Int64
    let lastModified: String

    var name: String { "bytes" }
    var methods: [HTTPMethod] { [.GET] }
    var usage: (pattern: String, summary: String) {
        (
            "/bytes/{size}[?seed=N]",
            "deterministic bytes (1500, 200KB, 1MB; max \(ByteCount(bytes: self.maximumSize))); "
                + "Range, ETag, If-None-Match, If-Range"
        )
    }

    func respond(to request: OriginRequest, arguments: ArraySlice<Substring>) -> OriginResponse {
        guard arguments.count == 1, let sizeText = arguments.first else {
            return .text(
                arguments.isEmpty ? .badRequest : .notFound,
                "usage: /bytes/{size}[?seed=N], e.g. /bytes/200KB?seed=7\n")
        }
        let size: Int64
        do {
            size = try OriginUnits.parseSize(sizeText, maximum: self.maximumSize)
        } catch {
            return .text(.badRequest, error.reason + "\n")
        }
        var seed: UInt64 = 0
        if let seedText = request.queryValue("seed") {
            guard !seedText.isEmpty, seedText.count <= 20, seedText.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = UInt64(seedText)
            else {
                return .text(.badRequest, "invalid seed '\(seedText)': expected an integer from 0 to \(UInt64.max)\n")
            }
            seed = value
        }

        return Self.serveFile(request, size: size, seed: seed, lastModified: self.lastModified)
    }

    /// A deterministic file served like a static one (shared with `/files/{name}`).
    static func serveFile(_ request: OriginRequest, size: Int64, seed: UInt64, lastModified: String) -> OriginResponse {
        let etag = EntityTag(opaque: "\(size)-\(seed)")
        let validators = Validators(etag: etag, lastModified: lastModified)
        var headers = validators.headers
        headers.add(name: "Accept-Ranges", value: "bytes")
        if validators.notModified(request) {
            return .empty(.notModified, headers: headers)
        }

        var resolution = ByteRangeRequest.Resolution.full
        if let range = request.headers.first(name: "range"),
            Self.ifRangeHolds(request.headers, etag: etag, lastModified: lastModified)
        {
            resolution = ByteRangeRequest(header: range).resolve(size: size)
        }
        let source = DeterministicBytes(seed: seed)
        switch resolution {
        case .full:
            headers.add(name: "Content-Type", value: "application/octet-stream")
            headers.add(name: "Content-Length", value: String(size))
            return OriginResponse(status: .ok, headers: headers, body: .generated(source, range: 0..<size))
        case .partial(let range):
            headers.add(name: "Content-Type", value: "application/octet-stream")
            headers.add(name: "Content-Range", value: "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)")
            headers.add(name: "Content-Length", value: String(range.count))
            return OriginResponse(status: .partialContent, headers: headers, body: .generated(source, range: range))
        case .unsatisfiable:
            return .text(
                .rangeNotSatisfiable, "range not satisfiable: the resource has \(size) bytes\n",
                headers: ["Content-Range": "bytes */\(size)", "ETag": etag.headerValue])
        }
    }

    /// `If-Range` absent, or naming the current representation: an entity tag by strong comparison, or exactly the
    /// `Last-Modified` date (which is old enough to be a strong validator).
    private static func ifRangeHolds(_ headers: HTTPHeaders, etag: EntityTag, lastModified: String) -> Bool {
        guard let ifRange = headers.first(name: "if-range") else { return true }
        let value = ifRange.trimmingWhitespace
        if value.hasPrefix("\"") || value.hasPrefix("W/") {
            return EntityTag(parsing: value).map { $0.strongMatches(etag) } ?? false
        }
        return value == lastModified
    }
}
