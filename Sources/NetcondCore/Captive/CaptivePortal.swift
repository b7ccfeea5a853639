import Foundation

/// A captive portal (hotel, airport, train Wi-Fi): until the client logs in, plain HTTP gets the
/// login page (or a redirect to it) whatever the host, and every other connection is reset,
/// blackholed or met with a certificate for the wrong name. The OS connectivity probes
/// (`captive.apple.com/hotspot-detect.html`, `connectivitycheck.gstatic.com/generate_204`,
/// `www.msftconnecttest.com/connecttest.txt` …) get the portal too, and once it is open (or in a
/// run without a portal) netcond answers them itself with their real "no portal" responses, so
/// detection logic can be tested offline. `portal.netcond.test` is the portal: `/login` (GET the
/// form, POST it to log in) and `/api`, an RFC 8908 Captive Portal API.
///
/// Pure and deterministic: time comes in from the caller.
public struct CaptivePortal: Sendable {
    public static let host = "portal.netcond.test"
    public static let loginURL = "http://\(host)/login"
    public static let apiURL = "http://\(host)/api"

    /// Nil when the run has no portal (probes are still answered with "no portal").
    public private(set) var spec: CaptivePortalSpec?
    public private(set) var isOpen: Bool
    /// When an open session ends (the spec's `session`), if it does.
    public private(set) var closesAt: Span?

    public init(spec: CaptivePortalSpec?) {
        self.spec = spec
        self.isOpen = spec.map(\.startsOpen) ?? true
        self.closesAt = nil
    }

    /// True while the portal intercepts traffic at `now` (since the run started).
    public func isClosed(at now: Span) -> Bool {
        guard self.spec != nil else { return false }
        guard self.isOpen else { return true }
        return self.closesAt.map { now >= $0 } ?? false
    }

    /// Opens the portal (a login, the timeline, or live); a `session` limit starts counting.
    public mutating func open(at now: Span) {
        guard self.spec != nil else { return }
        self.isOpen = true
        self.closesAt = self.spec?.session.map { now + $0 }
    }

    /// Closes it again (live, or the timeline: the session expired).
    public mutating func close() {
        guard self.spec != nil else { return }
        self.isOpen = false
        self.closesAt = nil
    }

    /// Replaces the portal (a profile switch): the new one starts as its spec says.
    public mutating func replace(with spec: CaptivePortalSpec?) {
        self = CaptivePortal(spec: spec)
    }

    // MARK: - Decisions

    /// What a plain HTTP request gets.
    public mutating func answer(method: String, host: String, path: String, at now: Span) -> CannedResponse? {
        let host = host.lowercased()
        let bare = path.prefix { $0 != "?" }
        if host == Self.host {
            return self.portalSite(method: method, path: String(bare), at: now)
        }
        if self.isClosed(at: now), let answer = self.closedAnswer(host: host, path: path) {
            return answer
        }
        return Self.probeAnswer(host: host, path: String(bare))
    }

    /// What a closed portal answers a plain HTTP request for `host` and `path` (the login page, or
    /// a redirect to it), whether or not it is closed now; nil without a portal. The packet engine's
    /// portal answers this on a connection it intercepted while closed.
    public func closedAnswer(host: String, path: String) -> CannedResponse? {
        guard let spec = self.spec else { return nil }
        switch spec.http {
        case .page: return Self.loginPage(status: 200)
        case .redirect:
            let original = "http://\(host)\(path)"
            return CannedResponse(
                status: 302,
                headers: [
                    ("Location", Self.loginURL + "?orig=" + Self.percentEncoded(original)),
                    ("Cache-Control", "no-store"),
                ],
                body: Array("<html><body>Redirecting to the network's login page.</body></html>\n".utf8),
                contentType: "text/html; charset=utf-8"
            )
        }
    }

    /// What a connection that is not plain HTTP (CONNECT, SOCKS5, forwards) to `port` meets while
    /// the portal is closed; nil when it passes.
    public func intercepts(host: String, at now: Span) -> CaptiveHTTPSBehaviour? {
        guard self.isClosed(at: now), let spec = self.spec, host.lowercased() != Self.host else { return nil }
        return spec.https
    }

    /// The RFC 8908 API's answer.
    public func apiState(at now: Span) -> CannedResponse {
        let captive = self.isClosed(at: now)
        var fields = ["\"captive\": \(captive)", "\"user-portal-url\": \"\(Self.loginURL)\""]
        if !captive, let closesAt = self.closesAt {
            let remaining = max(0, (closesAt - now).nanoseconds / 1_000_000_000)
            fields.append("\"seconds-remaining\": \(remaining)")
            fields.append("\"can-extend-session\": true")
        }
        return CannedResponse(
            status: 200,
            headers: [("Cache-Control", "private")],
            body: Array(("{" + fields.joined(separator: ", ") + "}\n").utf8),
            contentType: "application/captive+json"
        )
    }

    private mutating func portalSite(method: String, path: String, at now: Span) -> CannedResponse {
        switch (method, path) {
        case ("GET", "/api"), ("HEAD", "/api"):
            return self.apiState(at: now)
        case ("POST", "/login"):
            self.open(at: now)
            return CannedResponse(
                status: 200,
                headers: [("Cache-Control", "no-store")],
                body: Array(
                    "<html><head><title>Connected</title></head><body><h1>You are connected.</h1></body></html>\n".utf8),
                contentType: "text/html; charset=utf-8"
            )
        case ("GET", _), ("HEAD", _):
            return Self.loginPage(status: 200)
        default:
            return CannedResponse(
                status: 405, headers: [("Allow", "GET, HEAD, POST")],
                body: Array("netcond portal: \(method) \(path) is not supported; POST /login logs in\n".utf8),
                contentType: "text/plain; charset=utf-8"
            )
        }
    }

    public static func loginPage(status: Int) -> CannedResponse {
        let page = """
            <!DOCTYPE html>
            <html><head><title>Hotel Wi-Fi - Log in</title></head>
            <body>
            <h1>Welcome to netcond Hotel Wi-Fi</h1>
            <p>You must log in before you can use the internet.</p>
            <form method="POST" action="\(loginURL)">
            <label>Room number <input name="room" value="101"></label>
            <label><input type="checkbox" name="accept" checked> I accept the terms</label>
            <button type="submit">Connect</button>
            </form>
            </body></html>

            """
        return CannedResponse(
            status: status,
            headers: [("Cache-Control", "no-store")],
            body: Array(page.utf8),
            contentType: "text/html; charset=utf-8"
        )
    }

    /// The hosts that exist only to be probed (the packet engine's command finds them at the portal,
    /// as it finds `portal.netcond.test`); `www.apple.com` and `www.google.com` serve more than
    /// their probe paths and are left to the network.
    public static let probeHosts = [
        "captive.apple.com", "connectivitycheck.gstatic.com", "clients3.google.com", "connectivitycheck.android.com",
        "www.msftconnecttest.com", "www.msftncsi.com", "detectportal.firefox.com", "nmcheck.gnome.org",
    ]

    /// The operating systems' connectivity probes and their real "no portal" answers.
    static func probeAnswer(host: String, path: String) -> CannedResponse? {
        let text = "text/plain; charset=utf-8"
        switch (host, path) {
        case ("captive.apple.com", _), ("www.apple.com", "/library/test/success.html"):
            return CannedResponse(
                status: 200, headers: [],
                body: Array("<HTML><HEAD><TITLE>Success</TITLE></HEAD><BODY>Success</BODY></HTML>".utf8),
                contentType: "text/html"
            )
        case ("connectivitycheck.gstatic.com", "/generate_204"), ("clients3.google.com", "/generate_204"),
            ("www.google.com", "/gen_204"), ("connectivitycheck.android.com", "/generate_204"):
            return CannedResponse(status: 204, headers: [], body: [], contentType: nil)
        case ("www.msftconnecttest.com", "/connecttest.txt"):
            return CannedResponse(
                status: 200, headers: [], body: Array("Microsoft Connect Test".utf8), contentType: text)
        case ("www.msftncsi.com", "/ncsi.txt"):
            return CannedResponse(status: 200, headers: [], body: Array("Microsoft NCSI".utf8), contentType: text)
        case ("detectportal.firefox.com", "/success.txt"):
            return CannedResponse(status: 200, headers: [], body: Array("success\n".utf8), contentType: text)
        case ("nmcheck.gnome.org", "/check_network_status.txt"):
            return CannedResponse(
                status: 200, headers: [], body: Array("NetworkManager is online\n".utf8), contentType: text)
        default:
            return nil
        }
    }

    /// Every byte but the RFC 3986 unreserved characters percent-encoded (a URL as a query value).
    static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? text
    }

    private static let unreserved = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
}

/// How a profile's portal behaves.
public struct CaptivePortalSpec: Sendable, Equatable {
    public var http: CaptiveHTTPBehaviour
    public var https: CaptiveHTTPSBehaviour
    /// The portal starts open (a later close, live or from the timeline, brings it up).
    public var startsOpen: Bool
    /// How long a login lasts (nil: until the run ends or it is closed).
    public var session: Span?

    public init(
        http: CaptiveHTTPBehaviour = .page, https: CaptiveHTTPSBehaviour = .reset, startsOpen: Bool = false,
        session: Span? = nil
    ) {
        self.http = http
        self.https = https
        self.startsOpen = startsOpen
        self.session = session
    }
}

public enum CaptiveHTTPBehaviour: String, Sendable, Equatable, CaseIterable {
    /// `200` with the login page, for any URL.
    case page
    /// `302` to the login page.
    case redirect
}

public enum CaptiveHTTPSBehaviour: String, Sendable, Equatable, CaseIterable {
    /// The connection is reset one round trip later (the proxy reports it refused).
    case reset
    /// The handshake never completes.
    case blackhole
    /// The connection succeeds, to the portal: a TLS handshake with a certificate for
    /// `portal.netcond.test` from an untrusted throwaway CA (the name is wrong for every other host).
    case wrongCertificate = "wrong-certificate"
}

/// A response netcond writes itself (a portal page, a probe's answer, a fault's status).
public struct CannedResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var contentType: String?

    public init(status: Int, headers: [(String, String)], body: [UInt8], contentType: String?) {
        self.status = status
        self.headers = headers
        self.body = body
        self.contentType = contentType
    }

    public static func == (lhs: CannedResponse, rhs: CannedResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && lhs.contentType == rhs.contentType
            && lhs.headers.map { "\($0.0): \($0.1)" } == rhs.headers.map { "\($0.0): \($0.1)" }
    }
}

// MARK: - Decoding

extension CaptivePortalSpec {
    static let keys = ["http", "https", "open", "session"]

    /// `captive_portal: {http: page, https: reset, open: false, session: 30m}` (every key optional).
    init(node: ConfigNode) throws(ConfigError) {
        let map = try node.mapping(
            allowedKeys: Self.keys, expecting: "a mapping such as {http: redirect, https: reset} ({} for the defaults)"
        )
        self.init()
        if let node = map["http"] {
            self.http = try node.choice(CaptiveHTTPBehaviour.self)
        }
        if let node = map["https"] {
            self.https = try node.choice(CaptiveHTTPSBehaviour.self)
        }
        if let node = map["open"] { self.startsOpen = try node.choice(["true", "false"]) == "true" }
        if let node = map["session"] {
            self.session = try node.span(
                in: .seconds(1)...(.seconds(Int64(24 * 3600))), allowed: "1s…24h", example: "session: 30m")
        }
    }
}
