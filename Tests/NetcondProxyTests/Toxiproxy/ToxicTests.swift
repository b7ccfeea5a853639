import Foundation
import NetcondCore
import Testing

@testable import NetcondProxy

/// Toxiproxy's toxics as its API sends them: decoding with Toxiproxy's defaults and error shapes,
/// and the link they make.
@Suite struct ToxicTests {
    func decode(_ json: String, updating old: Toxic? = nil) throws(ToxiproxyError) -> Toxic {
        let object = try! JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
        return try Toxic.decode(object, updating: old)
    }

    func failure(_ json: String, updating old: Toxic? = nil) -> ToxiproxyError? {
        do {
            _ = try self.decode(json, updating: old)
            return nil
        } catch {
            return error
        }
    }

    @Test func defaultsAreToxiproxys() throws {
        let toxic = try self.decode(#"{"type": "latency", "attributes": {"latency": 100}}"#)
        #expect(
            toxic
                == Toxic(
                    name: "latency_downstream", stream: .downstream, toxicity: 1,
                    kind: .latency(latency: 100, jitter: 0)))
        let named = try self.decode(
            #"{"name": "slow", "type": "bandwidth", "stream": "upstream", "toxicity": 1.0, "attributes": {"rate": 64}}"#
        )
        #expect(named == Toxic(name: "slow", stream: .upstream, kind: .bandwidth(rate: 64)))
        // Attributes left out are 0 and shown, as Toxiproxy shows its struct's fields.
        let shown = try self.decode(#"{"type": "slicer", "attributes": {"average_size": 64}}"#).jsonObject
        #expect((shown["attributes"] as? [String: Any])?.keys.sorted() == ["average_size", "delay", "size_variation"])
        #expect(shown["type"] as? String == "slicer" && shown["stream"] as? String == "downstream")
    }

    @Test func badToxicsGetToxiproxysStatusAndMessage() throws {
        let unknown = self.failure(#"{"type": "lag"}"#)
        #expect(
            unknown?.status == 400 && unknown?.message.hasPrefix("invalid toxic type: 'lag'; allowed: latency") == true)
        #expect(self.failure(#"{"attributes": {}}"#)?.message.hasPrefix("invalid toxic type") == true)
        #expect(self.failure(#"{"type": "latency", "stream": "sideways"}"#) == ToxiproxyError.invalidStream)
        let cases: [(String, String)] = [
            (
                #"{"type": "latency", "attributes": {"latency": "100ms"}}"#,
                "'latency' must be a whole number (milliseconds)"
            ),
            (#"{"type": "latency", "attributes": {"latency": 1.5}}"#, "'latency' must be a whole number"),
            (#"{"type": "latency", "attributes": {"latency": true}}"#, "'latency' must be a whole number"),
            (#"{"type": "latency", "attributes": {"latency": -5}}"#, "'latency' must be 0 or more"),
            (
                #"{"type": "latency", "attributes": {"latency": 10000000000000}}"#,
                "'latency' must be at most 86400000 (milliseconds)"
            ),
            (#"{"type": "bandwidth", "attributes": {"rate": 1e300}}"#, "'rate' must be a whole number"),
            (#"{"type": "reset_peer", "toxicity": 2}"#, "toxicity must be a number from 0 to 1"),
            (#"{"type": "latency", "attributes": [1]}"#, "attributes must be an object"),
        ]
        for (json, expected) in cases {
            let error = self.failure(json)
            #expect(error?.status == 400, "\(json)")
            #expect(
                error?.message.hasPrefix("bad request body: ") == true && error?.message.contains(expected) == true,
                "\(json): \(String(describing: error))")
        }
        // Per connection, a share of the connections is fine; under --netcond-link a latency is
        // the link's, which cannot pick connections.
        #expect(self.failure(#"{"type": "reset_peer", "toxicity": 0.5}"#) == nil)
        #expect(self.failure(#"{"type": "latency", "toxicity": 0.5, "attributes": {"latency": 5}}"#) == nil)
        let onLink = #"{"type": "latency", "toxicity": 0.5, "attributes": {"latency": 5}}"#
        let object = try #require(JSONSerialization.jsonObject(with: Data(onLink.utf8)) as? [String: Any])
        #expect(throws: ToxiproxyError.self) { try Toxic.decode(object, onLink: true) }
        do {
            _ = try Toxic.decode(object, onLink: true)
        } catch {
            #expect(error.status == 400 && error.message.contains("cannot pick some connections"), "\(error)")
        }
        // As Toxiproxy: attributes a type does not have are ignored, and null is left out.
        #expect(
            (try? self.decode(#"{"type": "latency", "attributes": {"rate": 5, "latency": 3}}"#))?.kind
                == .latency(latency: 3, jitter: 0))
        #expect(
            (try? self.decode(#"{"type": "latency", "name": null, "stream": null, "toxicity": null}"#))?.name
                == "latency_downstream")
    }

    @Test func anUpdateChangesWhatItSaysAndKeepsTheRest() throws {
        let old = try self.decode(#"{"name": "lag", "type": "latency", "attributes": {"latency": 100, "jitter": 10}}"#)
        let new = try self.decode(#"{"attributes": {"latency": 300}}"#, updating: old)
        #expect(new == Toxic(name: "lag", stream: .downstream, kind: .latency(latency: 300, jitter: 10)))
        #expect(self.failure(#"{"type": "bandwidth"}"#, updating: old)?.message.contains("cannot change") == true)
        #expect(self.failure(#"{"stream": "upstream"}"#, updating: old)?.message.contains("cannot change") == true)
    }

    @Test func errorsAreToxiproxysJSON() throws {
        let object = try JSONSerialization.jsonObject(with: Data(ToxiproxyError.proxyNotFound.json)) as? [String: Any]
        #expect(object?["error"] as? String == "proxy not found" && object?["status"] as? Int == 404)
    }

    @Test func theLinkAddsLatenciesTakesTheLowestRateAndStallsForTimeout() {
        let toxics = [
            Toxic(name: "a", stream: .downstream, kind: .latency(latency: 105, jitter: 5)),
            Toxic(name: "b", stream: .downstream, kind: .latency(latency: 50, jitter: 0)),
            Toxic(name: "c", stream: .upstream, kind: .latency(latency: 20, jitter: 0)),
            Toxic(name: "d", stream: .downstream, kind: .bandwidth(rate: 100)),
            Toxic(name: "e", stream: .downstream, kind: .bandwidth(rate: 50)),
            Toxic(name: "f", stream: .upstream, kind: .timeout(timeout: 0)),
            Toxic(name: "g", stream: .downstream, kind: .limitData(bytes: 10)),
        ]
        let conditions = ToxicConditions(toxics: toxics, name: "db")
        #expect(conditions.profile.down.latency == .milliseconds(150))
        // 105 ± 5 ms is 100 ms plus up to 10.
        #expect(conditions.profile.down.jitter == .milliseconds(10))
        #expect(conditions.profile.up.latency == .milliseconds(20))
        // 50 KB/s of payload: the link carries 40 bytes of header per 1,460 besides.
        #expect(conditions.profile.down.connectionBandwidth == Bandwidth(bitsPerSecond: 410_959))
        #expect(conditions.profile.down.bandwidth == nil && conditions.profile.up.connectionBandwidth == nil)
        #expect(conditions.stall == .up)
        #expect(ToxicConditions(toxics: [], name: "db").profile.isPassThrough)
        #expect(ToxicConditions(toxics: [], name: "db").stall == nil)
        // Jitter beyond the latency: from 0 to latency + jitter.
        let wide = ToxicConditions(
            toxics: [Toxic(name: "w", stream: .upstream, kind: .latency(latency: 10, jitter: 30))], name: "db")
        #expect(wide.profile.up.latency == .zero && wide.profile.up.jitter == .milliseconds(40))
        // Rate 0: no limit, as in Toxiproxy.
        #expect(
            ToxicConditions(toxics: [Toxic(name: "b", stream: .downstream, kind: .bandwidth(rate: 0))], name: "db")
                .profile.isPassThrough)
    }
}
