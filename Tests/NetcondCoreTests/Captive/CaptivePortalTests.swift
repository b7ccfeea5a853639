import Testing

@testable import NetcondCore

/// The captive portal in virtual time: what plain HTTP, probes, other connections and the RFC 8908
/// API see before and after a login, and when a session runs out.
@Suite struct CaptivePortalTests {
    let errors = ProfileDecoderTests()

    func text(_ response: CannedResponse?) -> String {
        response.map { String(decoding: $0.body, as: UTF8.self) } ?? "(passes)"
    }

    @Test func closedPortalAnswersEveryPlainHTTPRequestWithTheLoginPage() {
        var portal = CaptivePortal(spec: CaptivePortalSpec())
        let page = portal.answer(method: "GET", host: "example.com", path: "/data.json", at: .zero)
        #expect(
            page?.status == 200
                && self.text(page).contains("<form method=\"POST\" action=\"http://portal.netcond.test/login\""))
        let probe = portal.answer(method: "GET", host: "captive.apple.com", path: "/hotspot-detect.html", at: .zero)
        #expect(probe?.status == 200 && !self.text(probe).contains("<BODY>Success</BODY>"))
        #expect(
            portal.answer(method: "GET", host: "connectivitycheck.gstatic.com", path: "/generate_204", at: .zero)?
                .status == 200)
        #expect(portal.intercepts(host: "example.com", at: .zero) == .reset)
        #expect(portal.intercepts(host: "portal.netcond.test", at: .zero) == nil)
    }

    @Test func redirectModeSendsTheOriginalURLAlong() {
        var portal = CaptivePortal(spec: CaptivePortalSpec(http: .redirect, https: .blackhole))
        let answer = portal.answer(method: "GET", host: "example.com", path: "/a b?x=1", at: .zero)
        #expect(answer?.status == 302)
        #expect(
            answer?.headers.first { $0.0 == "Location" }?.1
                == "http://portal.netcond.test/login?orig=http%3A%2F%2Fexample.com%2Fa%20b%3Fx%3D1")
        #expect(portal.intercepts(host: "example.com", at: .zero) == .blackhole)
    }

    @Test func aLoginOpensItAndProbesGetTheirRealAnswers() {
        var portal = CaptivePortal(spec: CaptivePortalSpec())
        #expect(
            self.text(portal.apiState(at: .zero))
                == #"{"captive": true, "user-portal-url": "http://portal.netcond.test/login"}"# + "\n")
        let login = portal.answer(method: "POST", host: "portal.netcond.test", path: "/login", at: .seconds(3))
        #expect(login?.status == 200 && self.text(login).contains("connected"))
        #expect(portal.answer(method: "GET", host: "example.com", path: "/", at: .seconds(4)) == nil)
        #expect(
            self.text(
                portal.answer(method: "GET", host: "captive.apple.com", path: "/hotspot-detect.html", at: .seconds(4)))
                == "<HTML><HEAD><TITLE>Success</TITLE></HEAD><BODY>Success</BODY></HTML>")
        let gstatic = portal.answer(
            method: "GET", host: "connectivitycheck.gstatic.com", path: "/generate_204", at: .seconds(4))
        #expect(gstatic?.status == 204 && gstatic?.body.isEmpty == true)
        #expect(
            self.text(
                portal.answer(method: "GET", host: "www.msftconnecttest.com", path: "/connecttest.txt", at: .seconds(4))
            )
                == "Microsoft Connect Test")
        #expect(portal.intercepts(host: "example.com", at: .seconds(4)) == nil)
        let api = portal.apiState(at: .seconds(4))
        #expect(api.contentType == "application/captive+json" && self.text(api).contains(#""captive": false"#))
    }

    @Test func aSessionRunsOutAndThePortalComesBack() {
        var portal = CaptivePortal(spec: CaptivePortalSpec(session: .seconds(60)))
        portal.open(at: .seconds(10))
        #expect(self.text(portal.apiState(at: .seconds(40))).contains(#""seconds-remaining": 30"#))
        #expect(!portal.isClosed(at: .milliseconds(69_999)))
        #expect(portal.isClosed(at: .seconds(70)))
        #expect(portal.answer(method: "GET", host: "example.com", path: "/", at: .seconds(71))?.status == 200)
    }

    @Test func withoutAPortalOnlyTheProbesAndThePortalSiteAreAnswered() {
        var none = CaptivePortal(spec: nil)
        #expect(none.answer(method: "GET", host: "example.com", path: "/", at: .zero) == nil)
        #expect(
            none.answer(method: "GET", host: "detectportal.firefox.com", path: "/success.txt", at: .zero)?.status == 200
        )
        #expect(self.text(none.apiState(at: .zero)).contains(#""captive": false"#))
        #expect(none.intercepts(host: "example.com", at: .zero) == nil)
        none.close()
        #expect(!none.isClosed(at: .zero))
    }

    @Test func aPortalThatStartsOpenClosesLive() {
        var portal = CaptivePortal(spec: CaptivePortalSpec(startsOpen: true))
        #expect(!portal.isClosed(at: .zero))
        portal.close()
        #expect(portal.isClosed(at: .seconds(1)))
    }

    @Test func decodingAndErrors() throws {
        let profile = try ProfileDecoder().decode(
            yaml: "extends: wifi\ncaptive_portal: {http: redirect, https: blackhole, session: 30m}\n", file: "c.yaml")
        #expect(
            profile.captivePortal
                == CaptivePortalSpec(http: .redirect, https: .blackhole, startsOpen: false, session: .seconds(1800)))
        #expect(!profile.isPassThrough)
        #expect(try ProfileDecoder().decode(yaml: profile.yamlDescription, file: "again.yaml") == profile)
        let hotel = try #require(ProfileCatalog.builtin(named: "captive-hotel"))
        #expect(hotel.captivePortal == CaptivePortalSpec())
        self.errors.expectError(
            "captive_portal: {https: wrong-cert}\n", at: 1, 25, keyPath: "captive_portal.https",
            containing: ["reset, blackhole"])
        self.errors.expectError(
            "captive_portal: {htp: page}\n", at: 1, 18, keyPath: "captive_portal.htp",
            containing: ["did you mean 'http'"])
        self.errors.expectError(
            "captive_portal: {session: 0s}\n", at: 1, 27, keyPath: "captive_portal.session",
            containing: ["1s…24h"])
    }
}
