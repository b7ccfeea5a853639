import Testing

@testable import NetcondCore

/// The stream engine with routes: a connection to a routed name crosses the access link and the
/// route's link in series, in both directions, for its handshake and its data.
@Suite struct RoutedLinkModelTests {
    static func profile(_ routeYAML: String) throws -> Profile {
        let yaml = "link: {latency: 20ms}\nroutes:\n" + routeYAML
        return try ProfileDecoder().decode(yaml: yaml, file: "routes.yaml")
    }

    static let cdn = "  - match: {host: cdn.example.test}\n    link: {latency: 300ms}\n"

    @Test(arguments: [("cdn.example.test", 640), ("api.example.test", 40)])
    func aHandshakeTakesTheRoundTripsOfItsPath(host: String, milliseconds: Int64) throws {
        var sim = LinkSimulation(try Self.profile(Self.cdn))
        let flow = sim.model.openFlow(at: .zero)
        guard case .established(let at, _) = sim.connect(flow, at: .zero, host: host) else {
            Issue.record("not established: \(sim.notices)")
            return
        }
        #expect(at == .ms(milliseconds))
        #expect(sim.model.route(of: flow) == (host.hasPrefix("cdn") ? 0 : nil))
    }

    /// A look-up meets the DNS delay of the route whose hosts name the name, whichever port the
    /// connection then takes (the route itself only on 443), as in the packet engine.
    @Test(arguments: [(443, 640 + 300), (80, 40 + 300)])
    func aLookUpMeetsTheDNSDelayOfTheRouteNamingIt(port: Int, milliseconds: Int64) throws {
        let route = "  - match: {host: cdn.example.test, port: 443}\n    link: {latency: 300ms}\n    dns_delay: 300ms\n"
        var sim = LinkSimulation(try Self.profile(route))
        let flow = sim.model.openFlow(at: .zero)
        guard
            case .established(let at, _) = sim.connect(
                flow, at: .zero, host: "cdn.example.test", port: port,
                resolvesName: true)
        else {
            Issue.record("not established: \(sim.notices)")
            return
        }
        #expect(at == .ms(milliseconds))
    }

    /// A request written while the connection is being set up leaves when it is established, and
    /// crosses both links.
    @Test func bytesWrittenDuringTheSetUpCrossBothLinks() throws {
        var sim = LinkSimulation(try Self.profile(Self.cdn))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.connect(flow, at: .zero, host: "cdn.example.test", port: 80, resolvesName: true)
        sim.model.send(flow, .up, bytes: 100, at: .zero)
        sim.run(until: .s(3))
        let up = sim.deliveries.first { $0.direction == .up }
        #expect(up?.at == .ms(640 + 320))
    }

    @Test func routedDataCrossesBothLinksEachWay() throws {
        var sim = LinkSimulation(try Self.profile(Self.cdn))
        let flow = sim.model.openFlow(at: .zero)
        guard case .established(let at, _) = sim.connect(flow, at: .zero, host: "cdn.example.test") else {
            Issue.record("not established")
            return
        }
        sim.model.send(flow, .up, bytes: 100, at: at)
        sim.run(until: at + .seconds(2))
        let up = sim.deliveries.first { $0.direction == .up }
        #expect(up?.at == at + .milliseconds(320))
        let answered = at + .seconds(2)
        sim.model.send(flow, .down, bytes: 100, at: answered)
        sim.run(until: answered + .seconds(2))
        let down = sim.deliveries.last { $0.direction == .down }
        #expect(down?.at == answered + .milliseconds(320))
    }

    /// A proxy's request head crosses the access link before it names its destination: the route's
    /// share of its way is taken before the handshake, so the answer comes when it would have.
    @Test func aHeadThatCrossedBeforeTheRouteWasKnownPaysTheRouteBeforeTheHandshake() throws {
        var sim = LinkSimulation(try Self.profile(Self.cdn))
        let flow = sim.model.openFlow(at: .zero)
        sim.model.send(flow, .up, bytes: 100, at: .zero)
        sim.run(until: .ms(20))
        #expect(sim.deliveries.first?.at == .ms(20))
        guard case .established(let at, _) = sim.connect(flow, at: .ms(20), host: "cdn.example.test") else {
            Issue.record("not established")
            return
        }
        #expect(at == .ms(20 + 300 + 640))
    }
}
