import Foundation
import NIOCore
import NIOEmbedded
import NetcondCore
import Testing

@testable import NetcondProxy

/// The event log's decisions are typed values; its JSON (`GET /events`, `netcond ctl events`) keeps
/// the same text as before, and rewording a `detail` changes nothing a check decides.
@Suite struct ProxyEventTests {
    func json(_ event: ProxyEvent) throws -> [String: Any] {
        let data = try JSONEncoder().encode(event)
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    @Test func outcomesAreWrittenAsTheirTextAndReadBackTyped() throws {
        let events = [
            ProxyEvent(at: 1, kind: .connect, detail: "anything", host: "h", port: 80, attempt: .timedOut),
            ProxyEvent(at: 2, kind: .client, detail: "anything", attempt: .noAnswer),
            ProxyEvent(
                at: 3, kind: .delivered, detail: "anything", cut: .reset, localPort: 5, bytes: 9, connectedAt: 0.5),
            ProxyEvent(at: 4, kind: .captive, detail: "anything", portal: .intercepted),
        ]
        #expect(try self.json(events[0])["outcome"] as? String == "timed out")
        #expect(try self.json(events[1])["outcome"] as? String == "no answer")
        #expect(try self.json(events[2])["outcome"] as? String == "reset")
        #expect(try self.json(events[3])["portal"] as? String == "intercepted")
        #expect(try self.json(events[3])["outcome"] == nil)
        for event in events {
            let back = try JSONDecoder().decode(ProxyEvent.self, from: JSONEncoder().encode(event))
            #expect(back == event)
        }
    }

    @Test func aPortalEventIsTypedWhateverItsWording() {
        let loop = EmbeddedEventLoop()
        let rules = ProxyRules(
            profile: Profile(name: "t", captivePortal: CaptivePortalSpec()), seed: 1, startedAt: .uptimeNanoseconds(0),
            eventLoop: loop, tls: nil)
        rules.setPortal(open: true, now: .uptimeNanoseconds(1_000_000_000))
        rules.setPortal(open: false, now: .uptimeNanoseconds(2_000_000_000))
        #expect(rules.events.map(\.portal) == [.opened, .closed])
    }
}
