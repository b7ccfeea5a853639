import Foundation

/// Which requests the control API serves at all, decided from a request's head before it is routed.
///
/// The API has no authentication: anything that can connect to its port may use it. What keeps a
/// web page the user happens to visit from driving it (changing the conditions, reading `/status`
/// and `/events`) is what a browser cannot hide or forge:
///
/// ```
///   Host: evil.example:8081          403  DNS rebinding: a page whose name now resolves to 127.0.0.1
///                                         sends that name (allowed: localhost, an IP, --control's name)
///   Origin: http://evil.example      403  a page elsewhere posting to 127.0.0.1 (CSRF): browsers send
///                                         Origin with every POST (allowed: http(s)://localhost, 127.x, [::1])
///   Content-Type: text/plain         415  what a page may send with no CORS preflight (text/plain, forms,
///                                         no body); every POST and every body must be application/json
///                                         (POST /faults: or a YAML type)
/// ```
///
/// No answer carries CORS headers, so a browser never lets a page elsewhere send a request that
/// passes these checks. Programs (curl, scripts, `netcond ctl`) send no `Origin` and a `Host` of
/// 127.0.0.1 or localhost, and pass.
public struct ControlAccess: Sendable, Equatable {
    /// The host name the API was told to listen on (`--control myhost:9001`), accepted in `Host` too.
    public var listenHost: String?

    public static let jsonTypes = ["application/json"]
    /// What `POST /faults` also takes (a fault is YAML, and JSON is YAML).
    public static let yamlTypes = ["application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"]

    public init(listenHost: String? = nil) {
        self.listenHost = listenHost.map { HostAddress.unbracketed($0).lowercased() }
    }

    /// Nil when the request may go on to `ControlAPI.route`; else why not (403 or 415).
    public func check(
        method: String,
        target: String,
        headers: [(name: String, value: String)],
        hasBody: Bool
    ) -> ControlAPI.Rejection? {
        func values(_ name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name }.map { $0.value.trimmingCharacters(in: .whitespaces) }
        }
        var authorities = values("host")
        if let scheme = target.range(of: "://") {
            authorities.append(String(target[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" }))
        }
        for authority in authorities where !self.acceptsHost(authority) {
            let named = self.listenHost.map { ", \($0)" } ?? ""
            return ControlAPI.Rejection(
                status: 403,
                message: "Host '\(authority)' is not accepted: the control API answers only requests addressed "
                    + "to an IP address or localhost, so that a web page cannot reach it under a name of its own "
                    + "(DNS rebinding); allowed: localhost\(named), 127.0.0.1, [::1] or another IP address, "
                    + "with the port"
            )
        }
        for origin in values("origin") where !Self.isLoopbackOrigin(origin) {
            return ControlAPI.Rejection(
                status: 403,
                message: "Origin '\(origin)' is not accepted: the control API takes no requests from web pages "
                    + "other than loopback ones (a page elsewhere must not change the conditions); allowed: no "
                    + "Origin header (curl, scripts, netcond ctl) or http(s)://localhost, 127.x.x.x or [::1]"
            )
        }
        guard method == "POST" || hasBody else { return nil }
        let path = ControlAPI.path(of: target)
        let allowed = path == "/faults" ? Self.jsonTypes + Self.yamlTypes : Self.jsonTypes
        let given = values("content-type").first
        let mediaType = given.map { String($0.prefix { $0 != ";" }).trimmingCharacters(in: .whitespaces).lowercased() }
        if let mediaType, allowed.contains(mediaType) { return nil }
        let what = given.map { "Content-Type '\($0)' is not accepted" } ?? "no Content-Type"
        let allowedText = path == "/faults" ? "application/json or application/yaml" : "application/json"
        return ControlAPI.Rejection(
            status: 415,
            message: "\(what) for \(method) \(path): every POST and every body must say it is JSON, so that a "
                + "web page cannot send one as a form or as text/plain; allowed: \(allowedText)"
        )
    }

    /// `localhost`, an IP literal (any: the API may listen where `--control` said), or the name the
    /// API listens on; with or without a port.
    func acceptsHost(_ authority: String) -> Bool {
        guard let host = HostAddress.host(ofAuthority: authority) else { return false }
        return host == "localhost" || HostAddress.isIPLiteral(host) || host == self.listenHost
    }

    /// `http(s)://` and a loopback host, with or without a port, and nothing after it.
    static func isLoopbackOrigin(_ origin: String) -> Bool {
        let lowered = origin.lowercased()
        for scheme in ["http://", "https://"] where lowered.hasPrefix(scheme) {
            let authority = String(lowered.dropFirst(scheme.count))
            guard !authority.contains("/"), let host = HostAddress.host(ofAuthority: authority) else { return false }
            return HostAddress.isLoopback(host)
        }
        return false
    }
}
