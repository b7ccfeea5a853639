import Foundation
import NIOPosix
import Testing

@testable import NetcondProxy

/// The Toxiproxy API's routing and state, request by request (proxies listen on 127.0.0.1).
@Suite struct ToxiproxyServerTests {
    func call(_ server: ToxiproxyServer, _ method: String, _ path: String, _ json: String? = nil) async -> (Int, Any?) {
        let answer = await server.answer(
            JSONHTTPRequest(
                method: method, target: path, headers: [("Host", "127.0.0.1:8474")], body: Array((json ?? "").utf8),
                tooLarge: false))
        let object = answer.json.isEmpty ? nil : try? JSONSerialization.jsonObject(with: Data(answer.json))
        return (answer.status, object)
    }

    func error(_ object: Any?) -> String? { (object as? [String: Any])?["error"] as? String }

    @Test func proxiesAndToxicsAnswerAsToxiproxyDoes() async throws {
        let server = ToxiproxyServer(seed: 1)
        let (created, proxy) = await self.call(
            server, "POST", "/proxies", #"{"name": "db", "upstream": "127.0.0.1:9"}"#)
        #expect(created == 201)
        let listen = try #require((proxy as? [String: Any])?["listen"] as? String)
        #expect(listen.hasPrefix("127.0.0.1:") && !listen.hasSuffix(":0"))
        #expect((proxy as? [String: Any])?["enabled"] as? Bool == true)
        let (again, taken) = await self.call(server, "POST", "/proxies", #"{"name": "db", "upstream": "127.0.0.1:9"}"#)
        #expect(again == 409 && self.error(taken) == "proxy already exists")
        #expect(await self.call(server, "GET", "/proxies/nothing").0 == 404)
        #expect(await self.call(server, "GET", "/nothing").0 == 404)
        #expect(await self.call(server, "PUT", "/proxies").0 == 405)
        let (missing, why) = await self.call(server, "POST", "/proxies", #"{"name": "x", "upstream": "127.0.0.1:0"}"#)
        #expect(missing == 400 && self.error(why)?.hasPrefix("bad request body: upstream '127.0.0.1:0'") == true)

        let (added, toxic) = await self.call(
            server, "POST", "/proxies/db/toxics", #"{"type": "latency", "attributes": {"latency": 50}}"#)
        #expect(added == 200 && (toxic as? [String: Any])?["name"] as? String == "latency_downstream")
        #expect(await self.call(server, "POST", "/proxies/db/toxics", #"{"type": "latency"}"#).0 == 409)
        let (updated, changed) = await self.call(
            server, "POST", "/proxies/db/toxics/latency_downstream", #"{"attributes": {"jitter": 5}}"#)
        #expect(updated == 200)
        #expect(((changed as? [String: Any])?["attributes"] as? [String: Any])?["latency"] as? Int == 50)
        let (deleted, nothing) = await self.call(server, "DELETE", "/proxies/db/toxics/latency_downstream")
        #expect(deleted == 204 && nothing == nil)
        #expect(await self.call(server, "DELETE", "/proxies/db/toxics/latency_downstream").0 == 404)

        _ = await self.call(server, "POST", "/proxies/db/toxics", #"{"type": "timeout"}"#)
        #expect(await self.call(server, "POST", "/proxies/db", #"{"enabled": false}"#).0 == 200)
        #expect(await self.call(server, "POST", "/reset").0 == 204)
        let (_, after) = await self.call(server, "GET", "/proxies/db")
        #expect((after as? [String: Any])?["enabled"] as? Bool == true)
        #expect(((after as? [String: Any])?["toxics"] as? [Any])?.isEmpty == true)
        #expect(await self.call(server, "DELETE", "/proxies/db").0 == 204)
        await server.stop()
        #expect(await self.call(server, "GET", "/proxies").0 == 503)
    }

    @Test func populateChecksEveryEntryBeforeChangingAnything() async throws {
        let server = ToxiproxyServer(seed: 1)
        _ = await self.call(server, "POST", "/proxies", #"{"name": "a", "upstream": "127.0.0.1:9"}"#)
        let (status, object) = await self.call(
            server, "POST", "/populate", #"[{"name": "a", "upstream": "127.0.0.1:10"}, {"name": "b"}]"#)
        #expect(status == 400 && self.error(object) == "missing required field: upstream at proxy 2")
        let (_, a) = await self.call(server, "GET", "/proxies/a")
        #expect((a as? [String: Any])?["upstream"] as? String == "127.0.0.1:9")
        #expect(await self.call(server, "GET", "/proxies/b").0 == 404)
        let (made, list) = await self.call(
            server, "POST", "/populate",
            #"[{"name": "a", "upstream": "127.0.0.1:10"}, {"name": "b", "upstream": "127.0.0.1:11"}]"#)
        #expect(made == 201 && ((list as? [String: Any])?["proxies"] as? [Any])?.count == 2)
        // The same proxy written with localhost is kept, toxics and all.
        let (_, bound) = await self.call(server, "GET", "/proxies/b")
        let port = try #require(((bound as? [String: Any])?["listen"] as? String)?.split(separator: ":").last)
        _ = await self.call(server, "POST", "/proxies/b/toxics", #"{"type": "latency", "attributes": {"latency": 5}}"#)
        _ = await self.call(
            server, "POST", "/populate", #"[{"name": "b", "listen": "localhost:\#(port)", "upstream": "127.0.0.1:11"}]"#
        )
        let (_, toxics) = await self.call(server, "GET", "/proxies/b/toxics")
        #expect((toxics as? [Any])?.count == 1)
        // One that cannot be made stops there: those before it stay, and the answer says what failed.
        let (failed, partial) = await self.call(
            server, "POST", "/populate",
            #"[{"name": "c", "upstream": "127.0.0.1:12"}, {"name": "d", "listen": "127.0.0.1:\#(port)", "upstream": "127.0.0.1:13"}, {"name": "e", "upstream": "127.0.0.1:14"}]"#
        )
        #expect(
            failed == 500 && ((partial as? [String: Any])?["proxies"] as? [Any])?.count == 1,
            "\(String(describing: partial))")
        #expect(self.error(partial)?.contains("address already in use") == true, "\(String(describing: partial))")
        #expect(await self.call(server, "GET", "/proxies/c").0 == 200)
        #expect(await self.call(server, "GET", "/proxies/e").0 == 404)
        await server.stop()
    }

    @Test func requestsAtOnceAreAnsweredOneAfterAnother() async throws {
        let server = ToxiproxyServer(seed: 1)
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    await self.call(server, "POST", "/proxies", #"{"name": "same", "upstream": "127.0.0.1:9"}"#).0
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.sorted() == [201, 409, 409, 409])
        await server.stop()
    }

    @Test func aPortThatCannotBeHadChangesNothing() async throws {
        let server = ToxiproxyServer(seed: 1)
        let (_, first) = await self.call(server, "POST", "/proxies", #"{"name": "a", "upstream": "127.0.0.1:9"}"#)
        let (_, second) = await self.call(server, "POST", "/proxies", #"{"name": "b", "upstream": "127.0.0.1:9"}"#)
        let taken = try #require((second as? [String: Any])?["listen"] as? String)
        let mine = try #require((first as? [String: Any])?["listen"] as? String)
        let (status, _) = await self.call(server, "POST", "/proxies/a", "{\"listen\": \"\(taken)\"}")
        #expect(status == 500)
        let (_, after) = await self.call(server, "GET", "/proxies/a")
        #expect((after as? [String: Any])?["listen"] as? String == mine)
        #expect((after as? [String: Any])?["enabled"] as? Bool == true)
        await server.stop()
    }

    @Test func aBrowserOrAPageIsRefusedAndAnyHostIsAChoice() {
        let access = ControlAccess()
        func refusal(_ headers: [(String, String)], anyHost: Bool = false) -> Int? {
            ToxiproxyServer.refusal(
                JSONHTTPRequest(
                    method: "POST", target: "/reset", headers: headers.map { (name: $0.0, value: $0.1) }, body: [],
                    tooLarge: false),
                access: access, anyHost: anyHost)?.status
        }
        #expect(refusal([("Host", "127.0.0.1:8474")]) == nil)
        #expect(refusal([("Host", "127.0.0.1:8474"), ("User-Agent", "Mozilla/5.0")]) == 403)
        #expect(refusal([("Host", "127.0.0.1:8474"), ("Origin", "http://evil.example")]) == 403)
        #expect(refusal([("Host", "toxiproxy:8474")]) == 403)
        #expect(refusal([("Host", "toxiproxy:8474")], anyHost: true) == nil)
        #expect(refusal([("Host", "toxiproxy:8474"), ("Origin", "http://evil.example")], anyHost: true) == 403)
    }

    @Test func aProxyTakesAtMostAThousandToxicsAndNamesAreBytes() async throws {
        let server = ToxiproxyServer(seed: 1)
        _ = await self.call(server, "POST", "/proxies", #"{"name": "db", "upstream": "127.0.0.1:9"}"#)
        for n in 0..<ToxiproxyServer.maxToxics {
            let (status, _) = await self.call(
                server, "POST", "/proxies/db/toxics",
                #"{"name": "l\#(n)", "type": "latency", "attributes": {"latency": 86400000}}"#)
            #expect(status == 200)
        }
        // A thousand days of latency at most: no sum can overflow, and the next one is refused.
        let (refused, error) = await self.call(
            server, "POST", "/proxies/db/toxics", #"{"name": "one-more", "type": "noop"}"#)
        #expect(refused == 400 && self.error(error)?.contains("at most 1000 toxics") == true)
        // é precomposed and decomposed: two proxies, as in Toxiproxy; a name over 1,000 bytes is refused.
        #expect(
            await self.call(server, "POST", "/proxies", #"{"name": "caf\#u{E9}", "upstream": "127.0.0.1:9"}"#).0 == 201)
        #expect(
            await self.call(server, "POST", "/proxies", #"{"name": "cafe\#u{301}", "upstream": "127.0.0.1:9"}"#).0
                == 201)
        let listed = await server.answer(
            JSONHTTPRequest(
                method: "GET", target: "/proxies", headers: [("Host", "127.0.0.1:8474")], body: [], tooLarge: false))
        let text = String(decoding: listed.json, as: UTF8.self)
        #expect(text.contains("\"caf\u{E9}\":") && text.contains("\"cafe\u{301}\":"), "\(text.prefix(300))")
        let long = String(repeating: "n", count: 1_001)
        #expect(
            await self.call(server, "POST", "/proxies", #"{"name": "\#(long)", "upstream": "127.0.0.1:9"}"#).0 == 400)
        await server.stop()
    }
}
