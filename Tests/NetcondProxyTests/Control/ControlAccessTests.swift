import Testing

@testable import NetcondProxy

/// Issue 15: what a web page could send the control API (by CSRF, or by DNS rebinding) is refused
/// before routing; what programs send passes.
@Suite struct ControlAccessTests {
    let access = ControlAccess()

    func check(
        _ method: String,
        _ target: String,
        _ headers: [(String, String)],
        body: Bool = false,
        access: ControlAccess? = nil
    ) -> ControlAPI.Rejection? {
        (access ?? self.access).check(
            method: method, target: target, headers: headers.map { (name: $0.0, value: $0.1) }, hasBody: body
        )
    }

    @Test func whatProgramsSendPasses() {
        let json = ("Content-Type", "application/json")
        #expect(self.check("GET", "/status", [("Host", "127.0.0.1:8081")]) == nil)
        #expect(self.check("GET", "/status", [("host", "localhost:8081")]) == nil)
        #expect(self.check("GET", "/status", [("Host", "LOCALHOST")]) == nil)
        #expect(self.check("GET", "/status", [("Host", "[::1]:8081")]) == nil)
        #expect(self.check("GET", "/status", [("Host", "127.3.4.5")]) == nil)
        #expect(self.check("GET", "/status", [("Host", "192.168.1.5:9001")]) == nil)  // where --control put it
        #expect(self.check("GET", "/status", []) == nil)  // HTTP/1.0, no Host
        #expect(self.check("GET", "http://127.0.0.1:8081/status", [("Host", "127.0.0.1:8081")]) == nil)
        #expect(self.check("POST", "/outage", [("Host", "127.0.0.1:8081"), json], body: true) == nil)
        #expect(self.check("POST", "/cut", [json]) == nil)
        #expect(self.check("POST", "/outage", [("Content-Type", "Application/JSON; charset=utf-8")], body: true) == nil)
        #expect(self.check("POST", "/faults", [("Content-Type", "application/yaml")], body: true) == nil)
        #expect(self.check("POST", "/faults", [("Content-Type", "text/x-yaml")], body: true) == nil)
        #expect(self.check("DELETE", "/outage", []) == nil)
        #expect(self.check("DELETE", "/faults/2", [("Host", "localhost")]) == nil)
        for origin in ["http://localhost:3000", "https://127.0.0.1", "http://[::1]:8000", "HTTP://LOCALHOST"] {
            #expect(self.check("POST", "/stall", [("Origin", origin), json], body: true) == nil, "\(origin)")
        }
    }

    @Test(arguments: [
        "evil.example", "evil.example:8081", "127.0.0.1.nip.io:8081", "localhost.evil.example", "localhost.",
        "", ":8081", "[::1", "[::1]x", "127.0.0.1:80a", "foo:bar:1",
    ])
    func aHostThatIsNotAnAddressOrLocalhostIsRefused(host: String) {
        let rejection = self.check("GET", "/events", [("Host", host)])
        #expect(rejection?.status == 403)
        #expect(rejection?.message.hasPrefix("Host '\(host)' is not accepted") == true, "\(host)")
        #expect(rejection?.message.contains("DNS rebinding") == true)
        #expect(rejection?.message.contains("allowed: localhost, 127.0.0.1, [::1] or another IP address") == true)
    }

    @Test func theHostOfAnAbsoluteTargetIsCheckedToo() {
        let rejection = self.check("GET", "http://evil.example:8081/status", [("Host", "127.0.0.1:8081")])
        #expect(rejection?.status == 403 && rejection?.message.hasPrefix("Host 'evil.example:8081'") == true)
    }

    @Test func theNameTheAPIListensOnIsAccepted() {
        let named = ControlAccess(listenHost: "Devbox.LAN")
        #expect(self.check("GET", "/status", [("Host", "devbox.lan:9001")], access: named) == nil)
        let rejection = self.check("GET", "/status", [("Host", "evil.example")], access: named)
        #expect(rejection?.message.contains("allowed: localhost, devbox.lan, 127.0.0.1") == true)
    }

    @Test(arguments: [
        "http://evil.example", "https://evil.example:443", "null", "http://127.0.0.1.evil.example",
        "http://192.168.1.5:8080", "file://", "http://localhost/path", "chrome-extension://abc", "",
    ])
    func anOriginThatIsNotLoopbackIsRefused(origin: String) {
        let headers = [("Host", "127.0.0.1:8081"), ("Origin", origin), ("Content-Type", "application/json")]
        let rejection = self.check("POST", "/outage", headers, body: true)
        #expect(rejection?.status == 403)
        #expect(rejection?.message.hasPrefix("Origin '\(origin)' is not accepted") == true)
        #expect(rejection?.message.contains("allowed: no Origin header") == true)
        // A GET from such a page is refused too (with DNS rebinding it could read the answer).
        #expect(self.check("GET", "/status", [("Origin", origin)])?.status == 403)
    }

    @Test func everyPostAndEveryBodyMustSayItIsJSON() {
        let cases: [(String, String, [(String, String)], Bool, String)] = [
            ("POST", "/outage", [("Content-Type", "text/plain")], true, "Content-Type 'text/plain' is not accepted"),
            ("POST", "/outage", [("Content-Type", "text/plain;charset=UTF-8")], true, "'text/plain;charset=UTF-8'"),
            ("POST", "/profile", [("Content-Type", "application/x-www-form-urlencoded")], true, "not accepted"),
            ("POST", "/captive", [("Content-Type", "multipart/form-data; boundary=x")], true, "not accepted"),
            ("POST", "/outage", [], true, "no Content-Type for POST /outage"),
            // What fetch(url, {method: 'POST', mode: 'no-cors'}) sends: no body, no type.
            ("POST", "/cut", [], false, "no Content-Type for POST /cut"),
            ("POST", "/profile", [("Content-Type", "application/yaml")], true, "allowed: application/json"),
            ("DELETE", "/faults", [("Content-Type", "text/plain")], true, "for DELETE /faults"),
        ]
        for (method, target, headers, body, reason) in cases {
            let rejection = self.check(method, target, headers, body: body)
            #expect(rejection?.status == 415, "\(method) \(target) \(headers)")
            #expect(rejection?.message.contains(reason) == true, "\(String(describing: rejection))")
        }
        let faults = self.check("POST", "/faults", [("Content-Type", "text/plain")], body: true)
        #expect(faults?.message.hasSuffix("allowed: application/json or application/yaml") == true)
        let outage = self.check("POST", "/outage", [("Content-Type", "text/plain")], body: true)
        #expect(outage?.message.hasSuffix("allowed: application/json") == true)
    }

    @Test func hostAndOriginAreCheckedBeforeTheType() {
        let headers = [("Host", "evil.example"), ("Content-Type", "text/plain")]
        let rejection = self.check("POST", "/outage", headers, body: true)
        #expect(rejection?.status == 403)
    }
}
