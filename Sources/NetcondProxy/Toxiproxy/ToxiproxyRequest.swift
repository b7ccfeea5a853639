import Foundation
import NetcondCore

/// What a request to the Toxiproxy API carries: who may send it, the fields of its body, read as
/// Toxiproxy reads them (a null is left out, as Go's decoder leaves the default), and addresses.
extension ToxiproxyServer {
    /// Host and Origin as the control API checks them; a browser's user agent as Toxiproxy does.
    static func refusal(_ request: JSONHTTPRequest, access: ControlAccess, anyHost: Bool = false) -> JSONHTTPResponse? {
        if request.headers.contains(where: { $0.name.lowercased() == "user-agent" && $0.value.hasPrefix("Mozilla/") }) {
            return JSONHTTPResponse(
                status: 403,
                json: ToxiproxyError(
                    message: "User agent not allowed: netcond's Toxiproxy API takes no requests from browsers "
                        + "(a web page must not change the conditions)",
                    status: 403
                ).json)
        }
        // The control API's checks, without its JSON-only rule: Toxiproxy's clients post /reset
        // with no body and no type; Origin is what keeps pages out.
        let headers = anyHost ? request.headers.filter { $0.name.lowercased() != "host" } : request.headers
        let target = anyHost ? request.path : request.target
        if let rejection = access.check(method: "GET", target: target, headers: headers, hasBody: false) {
            return JSONHTTPResponse(
                status: rejection.status,
                json: ToxiproxyError(message: rejection.message, status: rejection.status).json)
        }
        if request.tooLarge {
            return JSONHTTPResponse(
                status: 413, json: ToxiproxyError(message: "bad request body: over 1 MB", status: 413).json)
        }
        return nil
    }

    /// A request id as Toxiproxy's (an xid: 20 characters of base32hex).
    static func requestID() -> String {
        let digits = Array("0123456789abcdefghijklmnopqrstuv")
        return String((0..<20).map { _ in digits[Int.random(in: 0..<32)] })
    }

    static func object(_ body: [UInt8]) throws(ToxiproxyError) -> [String: Any] {
        switch ControlAPI.object(body, example: #"{"name": "redis", "upstream": "127.0.0.1:6379"}"#) {
        case .success(let object): return object.filter { !($0.value is NSNull) }
        case .failure(let rejection): throw .badBody(rejection.message)
        }
    }

    static func string(_ object: [String: Any], _ key: String) throws(ToxiproxyError) -> String? {
        guard let value = object[key], !(value is NSNull) else { return nil }
        guard let text = value as? String else { throw .badBody("\(key) must be a string") }
        return text
    }

    static func flag(_ object: [String: Any], _ key: String) throws(ToxiproxyError) -> Bool? {
        guard let value = object[key], !(value is NSNull) else { return nil }
        guard let number = value as? NSNumber, Toxic.isBoolean(number) else {
            throw .badBody("\(key) must be true or false")
        }
        return number.boolValue
    }

    /// Where a proxy listens: `host:port`, the port 0 for any free one, the host empty for every
    /// interface (as Go listens).
    static func listenAddress(_ text: String) throws(ToxiproxyError) -> (host: String, port: Int) {
        guard let (host, port) = Self.split(text), (0...65535).contains(port) else {
            throw .badBody("listen '\(text)' is not host:port (e.g. 127.0.0.1:26379, or port 0 for any free one)")
        }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }

    /// The server a proxy connects to: `host:port`, both given.
    static func upstreamAddress(_ text: String) throws(ToxiproxyError) -> (host: String, port: Int) {
        guard let (host, port) = Self.split(text), !host.isEmpty, (1...65535).contains(port) else {
            throw .badBody("upstream '\(text)' is not host:port with a port from 1 to 65535 (e.g. 127.0.0.1:6379)")
        }
        return (host, port)
    }

    private static func split(_ text: String) -> (String, Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else { return nil }
        let host = HostAddress.unbracketed(String(text[..<colon]))
        guard HostAddress.isIPLiteral(host) || !host.contains(":") else { return nil }
        return (host, port)
    }

    /// Two listen addresses are the same when they resolve alike (`localhost` is 127.0.0.1).
    static func sameListen(_ given: String, _ bound: String) -> Bool {
        guard let a = try? Self.listenAddress(given), let b = try? Self.listenAddress(bound) else {
            return given == bound
        }
        func plain(_ host: String) -> String {
            let lower = host.lowercased()
            return lower == "localhost" ? "127.0.0.1" : ProcessListeners.plainIP(lower)
        }
        return a.port == b.port && plain(a.host) == plain(b.host)
    }
}

/// A name as Toxiproxy keys it: its bytes (Swift's `String` equality would make `é` written two
/// ways one name, and Foundation's dictionaries too).
struct ExactName: Hashable {
    let bytes: [UInt8]

    init(_ name: String) { self.bytes = Array(name.utf8) }

    /// Longer names could be created but never named in a URL again (the request line's limit).
    static let limit = 1_000
}

/// A JSON object whose keys may be equal as Swift strings but not as bytes (`GET /proxies`): each
/// member serialized on its own, in the order given (sorted by key bytes).
struct RawJSON {
    var object: [(String, Any)] = []
    /// Written as it is instead.
    var text: String?

    func bytes() throws -> [UInt8] {
        if let text = self.text { return Array(text.utf8) }
        var out: [UInt8] = Array("{".utf8)
        for (i, (key, value)) in self.object.sorted(by: { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }).enumerated()
        {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            let keyArray = try JSONSerialization.data(withJSONObject: [key], options: [.withoutEscapingSlashes])
            out += keyArray.dropFirst().dropLast()
            out.append(UInt8(ascii: ":"))
            out += try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
