import NIOHTTP1

/// `GET /status/{code}` — answers with that status (200–599) and a small text body `"{code} {reason}\n"`, plus the
/// headers a client needs to react to it: `Location` for redirects, `WWW-Authenticate` for 401, and `Retry-After`
/// for 429/503 when `?retry_after=S` is given. 1xx cannot be sent as a final response and gets 400.
struct StatusEndpoint: OriginEndpoint {
    var name: String { "status" }
    var methods: [HTTPMethod] { [.GET] }
    var usage: (pattern: String, summary: String) {
        ("/status/{code}[?retry_after=S]", "that status (200-599); Retry-After for 429/503")
    }

    func respond(to request: OriginRequest, arguments: ArraySlice<Substring>) -> OriginResponse {
        guard arguments.count == 1, let codeText = arguments.first else {
            return .text(arguments.isEmpty ? .badRequest : .notFound, "usage: /status/{code}, e.g. /status/503\n")
        }
        guard codeText.count == 3, let code = OriginUnits.parseCount(codeText), (100...599).contains(code) else {
            return .text(.badRequest, "invalid status '\(codeText)': expected a code from 200 to 599\n")
        }
        guard code >= 200 else {
            return .text(.badRequest, "invalid status \(code): 1xx is not a final response; use 200 to 599\n")
        }
        let status = HTTPResponseStatus(statusCode: Int(code))
        var headers: HTTPHeaders = [:]
        if (300...399).contains(code) && code != 304 {
            headers.add(name: "Location", value: "/bytes/1KB")
        }
        if code == 401 {
            headers.add(name: "WWW-Authenticate", value: "Basic realm=\"netcond\"")
        }
        if let retryAfter = request.queryValue("retry_after") {
            guard let seconds = OriginUnits.parseCount(retryAfter) else {
                return .text(.badRequest, "invalid retry_after '\(retryAfter)': expected whole seconds, e.g. 5\n")
            }
            if code == 429 || code == 503 {
                headers.add(name: "Retry-After", value: String(seconds))
            }
        }
        if code == 204 || code == 304 {
            return .empty(status, headers: headers)
        }
        let reason = status.reasonPhrase.isEmpty ? "Unknown" : status.reasonPhrase
        return .text(status, "\(code) \(reason)\n", headers: headers)
    }
}
