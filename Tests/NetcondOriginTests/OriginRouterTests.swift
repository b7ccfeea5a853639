import NIOCore
import NIOHTTP1
import NetcondCore
import Testing

@testable import NetcondOrigin

/// Routing and endpoint decisions, as pure values: no channel, no clock.
@Suite("OriginRouter")
struct OriginRouterTests {
    let router = OriginRouter(configuration: OriginConfiguration())

    func respond(_ method: HTTPMethod, _ target: String, _ headers: [(String, String)] = []) -> OriginResponse {
        self.router.response(for: OriginRequest(method: method, target: target, headers: HTTPHeaders(headers)))
    }

    func respond(_ target: String, _ headers: [(String, String)] = []) -> OriginResponse {
        self.respond(.GET, target, headers)
    }

    func text(_ response: OriginResponse) -> String? {
        guard case .buffer(let buffer) = response.body else { return nil }
        return String(buffer: buffer)
    }

    @Test("GET /bytes/200KB: the whole file with its validators")
    func bytesFull() {
        let response = self.respond("/bytes/200KB")
        #expect(response.status == .ok)
        #expect(response.body == .generated(DeterministicBytes(seed: 0), range: 0..<204_800))
        #expect(response.headers["Content-Length"] == ["204800"])
        #expect(response.headers["Content-Type"] == ["application/octet-stream"])
        #expect(response.headers["ETag"] == ["\"204800-0\""])
        #expect(response.headers["Accept-Ranges"] == ["bytes"])
        #expect(response.headers["Last-Modified"] == ["Mon, 01 Jan 2024 00:00:00 GMT"])
        #expect(response.delay == nil)
    }

    @Test("?seed=N selects the stream and the ETag")
    func bytesSeed() {
        let response = self.respond("/bytes/1500?seed=77&other=1")
        #expect(response.body == .generated(DeterministicBytes(seed: 77), range: 0..<1500))
        #expect(response.headers["ETag"] == ["\"1500-77\""])
        #expect(self.respond("/bytes/1500?seed=-1").status == .badRequest)
        #expect(self.respond("/bytes/1500?seed=").status == .badRequest)
        #expect(self.respond("/bytes/1500?seed=18446744073709551616").status == .badRequest)
        #expect(self.respond("/bytes/1500?seed=18446744073709551615").status == .ok)
    }

    @Test("Range → 206 with Content-Range; suffix and open ranges")
    func bytesRange() {
        let response = self.respond("/bytes/1000", [("Range", "bytes=100-199")])
        #expect(response.status == .partialContent)
        #expect(response.body == .generated(DeterministicBytes(seed: 0), range: 100..<200))
        #expect(response.headers["Content-Range"] == ["bytes 100-199/1000"])
        #expect(response.headers["Content-Length"] == ["100"])
        let suffix = self.respond("/bytes/1000", [("Range", "bytes=-10")])
        #expect(suffix.headers["Content-Range"] == ["bytes 990-999/1000"])
        let open = self.respond("/bytes/1000", [("Range", "bytes=990-")])
        #expect(open.body == .generated(DeterministicBytes(seed: 0), range: 990..<1000))
    }

    @Test("unsatisfiable Range → 416 with Content-Range: bytes */size")
    func bytesUnsatisfiable() {
        let response = self.respond("/bytes/1000", [("Range", "bytes=1000-")])
        #expect(response.status == .rangeNotSatisfiable)
        #expect(response.headers["Content-Range"] == ["bytes */1000"])
    }

    @Test("multi-range and invalid Range → 200 full")
    func bytesMultiRange() {
        #expect(self.respond("/bytes/1000", [("Range", "bytes=0-1,5-9")]).status == .ok)
        #expect(self.respond("/bytes/1000", [("Range", "bytes=9-1")]).status == .ok)
    }

    @Test("If-None-Match → 304 without a body, including * and W/")
    func bytesNotModified() {
        for value in ["\"1000-0\"", "W/\"1000-0\"", "*", "\"x\", \"1000-0\""] {
            let response = self.respond("/bytes/1000", [("If-None-Match", value), ("Range", "bytes=0-1")])
            #expect(response.status == .notModified, "\(value)")
            #expect(response.body == .none)
            #expect(response.headers["ETag"] == ["\"1000-0\""])
            #expect(response.headers["Content-Length"].isEmpty)
        }
        #expect(self.respond("/bytes/1000", [("If-None-Match", "\"1000-1\"")]).status == .ok)
    }

    @Test("If-Range: matching ETag or date honours Range; anything else sends the full file")
    func bytesIfRange() {
        let matching = self.respond("/bytes/1000", [("Range", "bytes=10-"), ("If-Range", "\"1000-0\"")])
        #expect(matching.status == .partialContent)
        let date = self.respond("/bytes/1000", [("Range", "bytes=10-"), ("If-Range", "Mon, 01 Jan 2024 00:00:00 GMT")])
        #expect(date.status == .partialContent)
        for value in ["\"1000-9\"", "W/\"1000-0\"", "Tue, 02 Jan 2024 00:00:00 GMT", "junk"] {
            let response = self.respond("/bytes/1000", [("Range", "bytes=10-"), ("If-Range", value)])
            #expect(response.status == .ok, "\(value)")
            #expect(response.body == .generated(DeterministicBytes(seed: 0), range: 0..<1000))
        }
    }

    @Test("HEAD: the same headers as GET, no body")
    func head() {
        let response = self.respond(.HEAD, "/bytes/1MB")
        #expect(response.status == .ok)
        #expect(response.headers["Content-Length"] == ["1048576"])
        #expect(response.body == .none)
        let status = self.respond(.HEAD, "/status/404")
        #expect(status.status == .notFound)
        #expect(status.headers["Content-Length"] == ["14"])
        #expect(status.body == .none)
    }

    @Test("malformed sizes → 400 with a plain-text reason; extra segments → 404")
    func bytesBadSize() {
        let response = self.respond("/bytes/12XB")
        #expect(response.status == .badRequest)
        #expect(response.headers["Content-Type"] == ["text/plain; charset=utf-8"])
        #expect(self.text(response)?.contains("unknown unit 'XB'") == true)
        #expect(self.respond("/bytes/5GB").status == .badRequest)
        #expect(self.respond("/bytes").status == .badRequest)
        #expect(self.respond("/bytes/1KB/extra").status == .notFound)
        #expect(self.respond("/bytes/1KB/").status == .ok)
    }

    @Test("/status/{code}: that status and a text body")
    func status() {
        let response = self.respond("/status/503?retry_after=5")
        #expect(response.status == .serviceUnavailable)
        #expect(self.text(response) == "503 Service Unavailable\n")
        #expect(response.headers["Retry-After"] == ["5"])
        #expect(self.respond("/status/503").headers["Retry-After"].isEmpty)
        #expect(self.respond("/status/429?retry_after=1").headers["Retry-After"] == ["1"])
        #expect(self.respond("/status/500?retry_after=1").headers["Retry-After"].isEmpty)
        #expect(self.respond("/status/429?retry_after=soon").status == .badRequest)
        #expect(self.respond("/status/302").headers["Location"] == ["/bytes/1KB"])
        #expect(self.respond("/status/401").headers["WWW-Authenticate"] == ["Basic realm=\"netcond\""])
        #expect(self.text(self.respond("/status/200")) == "200 OK\n")
        #expect(self.text(self.respond("/status/599")) == "599 Unknown\n")
        let noContent = self.respond("/status/204")
        #expect(noContent.status == .noContent && noContent.body == .none)
        #expect(noContent.headers["Content-Length"].isEmpty)
        for bad in ["100", "199", "600", "99", "abc", "2000", "-200"] {
            #expect(self.respond("/status/\(bad)").status == .badRequest, "\(bad)")
        }
    }

    @Test("/delay/{duration}: a delayed 200 JSON")
    func delay() {
        let response = self.respond("/delay/1.5s")
        #expect(response.status == .ok)
        #expect(response.delay == .milliseconds(1500))
        #expect(self.text(response) == "{\"delay_ms\": 1500}\n")
        #expect(response.headers["Content-Type"] == ["application/json"])
        #expect(self.text(self.respond("/delay/0.25ms")) == "{\"delay_ms\": 0.25}\n")
        #expect(self.respond("/delay/61s").status == .badRequest)
        #expect(self.respond("/delay/61s").delay == nil)
    }

    @Test("/ lists the endpoints; unknown paths → 404")
    func indexAndNotFound() {
        let index = self.respond("/")
        #expect(index.status == .ok)
        #expect(
            self.text(index) == """
                netcond origin (GET or HEAD; POST to the /api endpoints that take it)

                  /                               this list
                  /bytes/{size}[?seed=N]          deterministic bytes (1500, 200KB, 1MB; max 4GB); Range, ETag, \
                If-None-Match, If-Range
                  /status/{code}[?retry_after=S]  that status (200-599); Retry-After for 429/503
                  /delay/{duration}               waits (500ms, 2s, 1.5s; max 60s), then 200 with JSON
                  /files/{name}                   the scenario's files (none in this run)
                  /api/{name}                     the scenario's JSON endpoints (none in this run)

                """)
        #expect(self.respond("/nope").status == .notFound)
        #expect(self.respond("/index.html").status == .notFound)
    }

    @Test("other methods → 405 with Allow")
    func methodNotAllowed() {
        for target in ["/bytes/1KB", "/status/200", "/delay/1s", "/"] {
            let response = self.respond(.POST, target)
            #expect(response.status == .methodNotAllowed, "\(target)")
            #expect(response.headers["Allow"] == ["GET, HEAD"])
        }
        #expect(self.respond(.DELETE, "/bytes/1KB").status == .methodNotAllowed)
        #expect(self.respond(.POST, "/nope").status == .notFound)
    }

    @Test("absolute-form targets are routed by their path; non-path targets → 400")
    func targets() {
        #expect(
            self.respond("http://origin.netcond.test/bytes/10?seed=2").body
                == .generated(DeterministicBytes(seed: 2), range: 0..<10))
        #expect(self.respond("http://origin.netcond.test").status == .ok)
        #expect(self.respond("*").status == .badRequest)
        #expect(self.respond("bytes/10").status == .badRequest)
        #expect(self.respond("/bytes/10#fragment").status == .ok)
    }
}
