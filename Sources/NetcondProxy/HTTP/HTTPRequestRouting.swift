import NIOHTTP1
import NetcondCore

/// Where an HTTP request to the forward proxy goes, and whether it can be passed on at all: pure
/// functions of the request head, used by ``HTTPProxyStateMachine``.
package enum HTTPRequestRouting {
    /// What was wrong with a request, in words (not the parser's case names).
    static func explain(_ error: HTTPParserError) -> String {
        switch error {
        case .invalidVersion: return "the version is not HTTP/1.0 or HTTP/1.1"
        case .invalidMethod: return "the method is not a valid token"
        case .invalidURL, .invalidHost, .invalidPort, .invalidPath, .invalidQueryString, .invalidFragment:
            return "the request target is not a valid URL"
        case .invalidHeaderToken, .invalidCharactersUsed, .invalidConstant:
            return "a character not allowed there (in the request line, a header name or a header value)"
        case .lfExpected, .strictModeAssertion: return "a line does not end with CRLF"
        case .headerOverflow: return "the request head is larger than 80 KB"
        case .invalidContentLength, .unexpectedContentLength: return "the Content-Length is not a valid length"
        case .invalidChunkSize: return "a chunk size of the chunked body is not valid hexadecimal"
        default: return "the request cannot be read as HTTP/1.x"
        }
    }

    /// Why a request cannot be routed, in words for its sender.
    package struct RouteProblem: Error {
        var message: String
    }

    /// Target and origin-form path of a request, or why it cannot be routed.
    package static func route(_ head: HTTPRequestHead) -> Result<(UpstreamTarget, String), RouteProblem> {
        let uri = head.uri
        if uri.lowercased().hasPrefix("http://") {
            let rest = uri.dropFirst("http://".count)
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            let authorityWithoutUser = authority.split(separator: "@").last.map(String.init) ?? ""
            guard let target = UpstreamTarget(authority: authorityWithoutUser, defaultPort: 80) else {
                return .failure(
                    RouteProblem(
                        message:
                            "bad host or port '\(authorityWithoutUser)' in '\(uri)'; allowed: a name or address, "
                            + "an IPv6 address in brackets, and a port from 1 to 65535 in digits"))
            }
            var path = String(rest[authorityEnd...])
            if path.hasPrefix("#") { path = "" }
            if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
            if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
            return .success((target, path))
        }
        if uri.hasPrefix("/"), let host = head.headers.first(name: "Host"),
            let target = UpstreamTarget(authority: host, defaultPort: 80)
        {
            return .success((target, uri))
        }
        return .failure(
            RouteProblem(
                message:
                    "netcond is a forward proxy: send an absolute URL (GET http://host/path) or CONNECT host:port; got '\(uri)'"
            ))
    }

    /// Why a request's framing cannot be trusted (nil when it can): a request a server could read
    /// differently from the proxy would let a second request pass the proxy unseen.
    package static func framingProblem(_ head: HTTPRequestHead) -> String? {
        if head.headers[canonicalForm: "Host"].count > 1 {
            return "more than one Host header; send exactly one"
        }
        if head.version.major != 1 || head.version.minor > 1 {
            return "HTTP/\(head.version.major).\(head.version.minor) is not spoken here; send HTTP/1.1"
        }
        // The parser hands over text: bytes that are not UTF-8 come out as U+FFFD, and would reach
        // the server changed. Refused rather than passed on altered.
        let replacement: Character = "\u{FFFD}"
        if let (name, _) = head.headers.first(where: { $0.name.contains(replacement) || $0.value.contains(replacement) }
        ) {
            return
                "the header '\(name.replacingOccurrences(of: "\u{FFFD}", with: "?"))' holds bytes that are not UTF-8, "
                + "which netcond cannot pass on unchanged; send them percent-encoded (or as RFC 8187 ext-value)"
        }
        if head.uri.contains(replacement) {
            return
                "the request target holds bytes that are not UTF-8, which netcond cannot pass on unchanged; send them percent-encoded"
        }
        guard head.headers.contains(name: "Transfer-Encoding") else { return nil }
        if head.version.minor == 0 {
            return "an HTTP/1.0 request with Transfer-Encoding has no trustworthy length (RFC 9112 §6.1); "
                + "send HTTP/1.1, or HTTP/1.0 with Content-Length"
        }
        if head.headers.contains(name: "Content-Length") {
            return "both Transfer-Encoding and Content-Length (RFC 9112 §6.3); send one of them"
        }
        return nil
    }

    static func hostHeader(_ target: UpstreamTarget) -> String {
        target.port == 80 ? target.host : target.description
    }

    /// The head the server gets: origin-form, without the proxy's own headers, with a Host.
    static func upstreamHead(_ head: HTTPRequestHead, target: UpstreamTarget, path: String) -> HTTPRequestHead {
        var upstreamHead = head
        upstreamHead.uri = path
        upstreamHead.headers.remove(name: "Proxy-Connection")
        upstreamHead.headers.remove(name: "Proxy-Authorization")
        if !upstreamHead.headers.contains(name: "Host") {
            upstreamHead.headers.add(name: "Host", value: Self.hostHeader(target))
        }
        return upstreamHead
    }
}
