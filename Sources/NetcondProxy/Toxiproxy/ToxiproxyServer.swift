import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NetcondCore

/// Toxiproxy's REST API served by netcond (`netcond toxiproxy`): a suite written against Toxiproxy
/// (its Go, Ruby, Python, Java or .NET client) runs unchanged: each of its proxies is a
/// ``ToxicRelay`` whose connections meet the toxics as Toxiproxy's do (with `netcondLink`, a
/// netcond forward whose link the latency, bandwidth and timeout toxics set). Endpoints as Toxiproxy's:
///
/// | method + path | does |
/// | --- | --- |
/// | `GET /version` | `{"version": "…"}` |
/// | `GET /proxies`, `POST /proxies` | list (by name), create (201; 409 when the name is taken) |
/// | `POST /populate` | create or replace a list of proxies (201, `{"proxies": [...]}`) |
/// | `GET`, `POST`/`PATCH`, `DELETE /proxies/{proxy}` | show, update (`enabled`, `listen`, `upstream`), delete (204) |
/// | `GET`, `POST /proxies/{proxy}/toxics` | list, add (409 when the name is taken) |
/// | `GET`, `POST`/`PATCH`, `DELETE /proxies/{proxy}/toxics/{toxic}` | show, update attributes/toxicity, remove (204) |
/// | `POST /reset` | every proxy enabled, every toxic removed (204) |
/// | `GET /metrics` | each open proxy's bytes in Prometheus's text format, named as Toxiproxy names them |
///
/// Errors have Toxiproxy's shape (`{"error": "…", "status": N}`). Requests a web page could send
/// are refused as the control API refuses them (a `Host` that is not an IP or localhost, an
/// `Origin` other than a loopback page) and, as Toxiproxy does, any from a browser's user agent.
public actor ToxiproxyServer {
    /// The Toxiproxy version netcond answers as (the one whose API and behaviour it serves), as a
    /// release of it answers: clients that compare versions see 2.12.0 (a suffix would make it
    /// sort below 2.12.0). netcond names itself on its own stdout line.
    public static let version = "2.12.0"

    private final class Entry {
        var name: String
        /// As bound (`127.0.0.1:PORT`) once the proxy has listened; as asked before.
        var listen: String
        var upstream: String
        var enabled: Bool
        var toxics: [Toxic] = []
        /// `--netcond-link`: a netcond forward whose link the toxics set.
        var server: ProxyServer?
        /// As Toxiproxy: a relay, each connection through the toxics on its own.
        var relay: ToxicRelay?
        var connections: NIOLoopBoundBox<ToxicConnections>?
        /// Its bytes since it last opened (`/metrics`); nil while it is closed.
        var tally: ToxicTally?
        var isOpen: Bool { self.server != nil || self.relay != nil }
        /// The proxy's number, for its seed.
        let index: UInt64

        init(name: String, listen: String, upstream: String, enabled: Bool, index: UInt64) {
            self.name = name
            self.listen = listen
            self.upstream = upstream
            self.enabled = enabled
            self.index = index
        }

        var jsonObject: [String: Any] {
            [
                "name": self.name, "listen": self.listen, "upstream": self.upstream, "enabled": self.enabled,
                "toxics": self.toxics.map(\.jsonObject),
            ]
        }
    }

    private let seed: UInt64
    private let group: EventLoopGroup
    private let anyHost: Bool
    private let netcondLink: Bool
    /// By name, compared byte for byte as Toxiproxy compares them (two spellings of é are two names).
    private var proxies: [ExactName: Entry] = [:]
    private var created: UInt64 = 0
    private var stopped = false
    private let http: NIOLockedValueBox<JSONHTTPServer?> = NIOLockedValueBox(nil)
    private let metrics = MetricsExposition()
    /// Requests are answered one at a time, in order: each sees the state the one before left,
    /// even across the awaits of starting and stopping proxies.
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// `anyHost`: accept any `Host` (a container's service name, `toxiproxy:8474`), giving up the
    /// DNS-rebinding check; browsers stay refused by their user agent and `Origin`.
    /// `netcondLink`: latency, bandwidth and timeout toxics set a netcond link that the proxy's
    /// connections share (see ``ToxicConditions``), rather than acting on each connection as in Toxiproxy.
    public init(
        seed: UInt64, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton, anyHost: Bool = false,
        netcondLink: Bool = false
    ) {
        self.seed = seed
        self.group = group
        self.anyHost = anyHost
        self.netcondLink = netcondLink
    }

    private func acquire() async {
        guard self.busy else {
            self.busy = true
            return
        }
        await withCheckedContinuation { self.waiting.append($0) }
    }

    private func release() {
        if self.waiting.isEmpty {
            self.busy = false
        } else {
            self.waiting.removeFirst().resume()
        }
    }

    /// Serves the API at `host:port` (0: any free port).
    public func start(host: String, port: Int) async throws -> SocketAddress {
        let access = ControlAccess(listenHost: HostAddress.isIPLiteral(HostAddress.unbracketed(host)) ? nil : host)
        let anyHost = self.anyHost
        let server = JSONHTTPServer(maxBodyBytes: ControlAPI.maxBodyBytes) { [weak self] request in
            guard let self else {
                return JSONHTTPResponse(
                    status: 503, json: ToxiproxyError(message: "netcond has stopped", status: 503).json)
            }
            var response = Self.refusal(request, access: access, anyHost: anyHost)
            if response == nil, request.path == "/metrics", request.method == "GET" {
                response = await self.metricsAnswer()
            }
            if response == nil { response = await self.answer(request) }
            // As Toxiproxy's middleware: an id for every request.
            response?.headers.append(("X-Toxiproxy-Request-Id", Self.requestID()))
            return response ?? JSONHTTPResponse(status: 500, json: [])
        }
        self.http.withLockedValue { $0 = server }
        return try await server.start(host: host, port: port, what: "the Toxiproxy API")
    }

    static let maxToxics = 1_000

    /// `GET /metrics`: each open proxy's bytes, as Toxiproxy's `-proxy-metrics` names them.
    func metricsAnswer() -> JSONHTTPResponse {
        let samples = self.proxies.values.sorted { $0.index < $1.index }.flatMap { entry in
            entry.tally?.samples(proxy: entry.name, listener: entry.listen, upstream: entry.upstream) ?? []
        }
        return .metrics(self.metrics.publish(samples))
    }

    /// Stops the API and every proxy (their listeners and connections).
    public func stop() async {
        let http = self.http.withLockedValue { server in
            defer { server = nil }
            return server
        }
        await http?.stop()
        await self.acquire()
        defer { self.release() }
        self.stopped = true
        for entry in self.proxies.values { await self.close(entry) }
        self.proxies = [:]
    }

    /// Creates the proxies of a Toxiproxy config file (`toxiproxy-server -config`): a JSON list of
    /// `{"name", "listen", "upstream", "enabled"}`.
    public func populate(json: [UInt8]) async -> (status: Int, json: [UInt8]) {
        let answer = await self.answer(
            JSONHTTPRequest(method: "POST", target: "/populate", headers: [], body: json, tooLarge: false))
        return (answer.status, answer.json)
    }

    // MARK: - Requests

    func answer(_ request: JSONHTTPRequest) async -> JSONHTTPResponse {
        await self.acquire()
        defer { self.release() }
        guard !self.stopped else {
            return JSONHTTPResponse(status: 503, json: ToxiproxyError(message: "netcond is stopping", status: 503).json)
        }
        do {
            let (status, object) = try await self.route(request)
            guard let object else { return JSONHTTPResponse(status: status, json: []) }
            if let raw = object as? RawJSON { return JSONHTTPResponse(status: status, json: try raw.bytes() + [0x0A]) }
            let data = try JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            return JSONHTTPResponse(status: status, json: Array(data) + [0x0A])
        } catch let error as ToxiproxyError {
            return JSONHTTPResponse(status: error.status, json: error.json)
        } catch {
            return JSONHTTPResponse(status: 500, json: ToxiproxyError(message: "\(error)", status: 500).json)
        }
    }

    /// A request's path, split at its slashes (each part percent-decoded) and its answer.
    private func route(_ request: JSONHTTPRequest) async throws -> (Int, Any?) {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map {
            String($0).removingPercentEncoding ?? String($0)
        }
        let method = request.method
        switch parts.count {
        case 1 where parts[0] == "version":
            guard method == "GET" else { throw Self.wrong(request, "GET") }
            // Byte for byte as Toxiproxy writes it.
            return (200, RawJSON(text: "{\"version\": \"\(Self.version)\"}"))
        case 1 where parts[0] == "reset":
            guard method == "POST" else { throw Self.wrong(request, "POST") }
            try await self.reset()
            return (204, nil)
        case 1 where parts[0] == "populate":
            guard method == "POST" else { throw Self.wrong(request, "POST") }
            return try await self.populate(body: request.body)
        case 1 where parts[0] == "proxies":
            return try await self.proxiesRoute(request)
        case 2 where parts[0] == "proxies":
            return try await self.proxyRoute(request, entry: try self.entry(parts[1]))
        case 3 where parts[0] == "proxies" && parts[2] == "toxics":
            return try await self.toxicsRoute(request, entry: try self.entry(parts[1]))
        case 4 where parts[0] == "proxies" && parts[2] == "toxics":
            return try await self.toxicRoute(request, entry: try self.entry(parts[1]), name: parts[3])
        default:
            throw ToxiproxyError(
                message:
                    "not found: \(request.path); endpoints: /version, /reset, /populate, /metrics, /proxies, "
                    + "/proxies/{proxy}, /proxies/{proxy}/toxics, /proxies/{proxy}/toxics/{toxic}", status: 404)
        }
    }

    private static func wrong(_ request: JSONHTTPRequest, _ allowed: String) -> ToxiproxyError {
        ToxiproxyError(
            message: "method not allowed: \(request.method) \(request.path); allowed: \(allowed)", status: 405)
    }

    /// `/proxies`: list, create.
    private func proxiesRoute(_ request: JSONHTTPRequest) async throws -> (Int, Any?) {
        switch request.method {
        case "GET":
            return (200, RawJSON(object: self.proxies.values.map { ($0.name, $0.jsonObject) }))
        case "POST":
            let entry = try await self.create(try Self.object(request.body))
            return (201, entry.jsonObject)
        default: throw Self.wrong(request, "GET or POST")
        }
    }

    /// `/proxies/{proxy}`: show, update, delete.
    private func proxyRoute(_ request: JSONHTTPRequest, entry: Entry) async throws -> (Int, Any?) {
        switch request.method {
        case "GET": return (200, entry.jsonObject)
        case "POST", "PATCH":
            try await self.update(entry, try Self.object(request.body))
            return (200, entry.jsonObject)
        case "DELETE":
            await self.close(entry)
            self.proxies[ExactName(entry.name)] = nil
            return (204, nil)
        default: throw Self.wrong(request, "GET, POST, PATCH or DELETE")
        }
    }

    /// `/proxies/{proxy}/toxics`: list, add.
    private func toxicsRoute(_ request: JSONHTTPRequest, entry: Entry) async throws -> (Int, Any?) {
        switch request.method {
        case "GET": return (200, entry.toxics.map(\.jsonObject))
        case "POST":
            let toxic = try Toxic.decode(try Self.object(request.body), onLink: self.netcondLink)
            guard !entry.toxics.contains(where: { ToxicChain.sameName($0.name, toxic.name) }) else {
                throw ToxiproxyError.toxicExists
            }
            guard entry.toxics.count < Self.maxToxics else {
                // Bounds the work per chunk, and the sum of the latencies (1,000 days at most).
                throw ToxiproxyError.badBody("a proxy has at most \(Self.maxToxics) toxics; remove one first")
            }
            try await self.setToxics(entry, entry.toxics + [toxic])
            return (200, toxic.jsonObject)
        default: throw Self.wrong(request, "GET or POST")
        }
    }

    /// `/proxies/{proxy}/toxics/{toxic}`: show, update, remove.
    private func toxicRoute(_ request: JSONHTTPRequest, entry: Entry, name: String) async throws -> (Int, Any?) {
        guard let position = entry.toxics.firstIndex(where: { ToxicChain.sameName($0.name, name) }) else {
            throw ToxiproxyError.toxicNotFound
        }
        switch request.method {
        case "GET": return (200, entry.toxics[position].jsonObject)
        case "POST", "PATCH":
            let toxic = try Toxic.decode(
                try Self.object(request.body), updating: entry.toxics[position], onLink: self.netcondLink)
            var toxics = entry.toxics
            toxics[position] = toxic
            try await self.setToxics(entry, toxics)
            return (200, toxic.jsonObject)
        case "DELETE":
            var toxics = entry.toxics
            toxics.remove(at: position)
            try await self.setToxics(entry, toxics)
            return (204, nil)
        default: throw Self.wrong(request, "GET, POST, PATCH or DELETE")
        }
    }

    private func entry(_ name: String) throws(ToxiproxyError) -> Entry {
        guard let entry = self.proxies[ExactName(name)] else { throw ToxiproxyError.proxyNotFound }
        return entry
    }

    private func create(_ object: [String: Any]) async throws -> Entry {
        guard let name = try Self.string(object, "name"), !name.isEmpty else {
            throw ToxiproxyError.missingField("name")
        }
        guard let upstream = try Self.string(object, "upstream"), !upstream.isEmpty else {
            throw ToxiproxyError.missingField("upstream")
        }
        guard !name.contains("/") else { throw ToxiproxyError.badBody("a proxy's name cannot contain '/'") }
        guard name.utf8.count <= ExactName.limit else {
            throw ToxiproxyError.badBody(
                "a proxy's name is at most \(ExactName.limit) bytes (one longer could not be named in a URL)")
        }
        _ = try Self.upstreamAddress(upstream)
        let listen = try Self.string(object, "listen") ?? "127.0.0.1:0"
        _ = try Self.listenAddress(listen)
        let enabled = try Self.flag(object, "enabled") ?? true
        guard self.proxies[ExactName(name)] == nil else { throw ToxiproxyError.proxyExists }
        self.created += 1
        let entry = Entry(name: name, listen: listen, upstream: upstream, enabled: enabled, index: self.created)
        if enabled { try await self.open(entry) }
        self.proxies[ExactName(name)] = entry
        return entry
    }

    private func update(_ entry: Entry, _ object: [String: Any]) async throws {
        let listen = try Self.string(object, "listen") ?? entry.listen
        let upstream = try Self.string(object, "upstream") ?? entry.upstream
        let enabled = try Self.flag(object, "enabled") ?? entry.enabled
        _ = try Self.listenAddress(listen)
        _ = try Self.upstreamAddress(upstream)
        let moved = listen != entry.listen || upstream != entry.upstream
        let before = (listen: entry.listen, upstream: entry.upstream, running: entry.isOpen)
        if entry.isOpen && (!enabled || moved) {
            await self.close(entry)
        }
        entry.listen = listen
        entry.upstream = upstream
        do {
            if enabled && !entry.isOpen { try await self.open(entry) }
        } catch {
            // Nothing changes when the new address cannot be had: the proxy as it was.
            entry.listen = before.listen
            entry.upstream = before.upstream
            if before.running { try? await self.open(entry) }
            throw error
        }
        entry.enabled = enabled
    }

    /// As Toxiproxy's: every entry must name itself and its upstream (else nothing changes, 400
    /// naming the entry); then each in turn is kept when it is the same (its listen address compared
    /// as resolved: `localhost:26379` is `127.0.0.1:26379`), replaced (its toxics gone) when it
    /// differs, or created. One that cannot be made stops there: those before it stay, and the
    /// answer carries the error with the proxies made.
    private func populate(body: [UInt8]) async throws -> (Int, Any?) {
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(body)), let list = parsed as? [[String: Any]]
        else {
            throw ToxiproxyError.badBody(
                "expected a JSON list of proxies, e.g. [{\"name\": \"redis\", \"listen\": \"127.0.0.1:26379\", "
                    + "\"upstream\": \"127.0.0.1:6379\"}]")
        }
        for (number, object) in zip(1..., list) {
            guard let name = try Self.string(object, "name"), !name.isEmpty else {
                throw ToxiproxyError.missingField("name at proxy \(number)")
            }
            guard let upstream = try Self.string(object, "upstream"), !upstream.isEmpty else {
                throw ToxiproxyError.missingField("upstream at proxy \(number)")
            }
        }
        var made: [Entry] = []
        for object in list {
            do {
                let name = try Self.string(object, "name") ?? ""
                if let old = self.proxies[ExactName(name)] {
                    let listen = try Self.string(object, "listen") ?? "127.0.0.1:0"
                    let upstream = try Self.string(object, "upstream")
                    if Self.sameListen(listen, old.listen) && upstream == old.upstream {
                        made.append(old)
                        continue
                    }
                    await self.close(old)
                    self.proxies[ExactName(name)] = nil
                }
                made.append(try await self.create(object))
            } catch let error as ToxiproxyError {
                var answer: [String: Any] = ["error": error.message, "status": error.status]
                answer["proxies"] = made.map(\.jsonObject)
                return (error.status, answer)
            }
        }
        return (201, ["proxies": made.map(\.jsonObject)])
    }

    private func reset() async throws {
        for entry in self.proxies.values.sorted(by: { $0.index < $1.index }) {
            try await self.setToxics(entry, [])
            if !entry.isOpen {
                try await self.open(entry)
            }
            entry.enabled = true
        }
    }

    // MARK: - The proxies' links

    private func open(_ entry: Entry) async throws {
        var (host, port) = try Self.listenAddress(entry.listen)
        // As Go resolves it for Toxiproxy: localhost is 127.0.0.1 (and so named in errors).
        if host.lowercased() == "localhost" { host = "127.0.0.1" }
        let (targetHost, targetPort) = try Self.upstreamAddress(entry.upstream)
        // The proxy's loop, chosen here so that its connections' toxics can be bound to it.
        let loop = self.group.next()
        let seed = SeedDeriver.derive(self.seed, entry.index)
        let tally = ToxicTally()
        let bound: SocketAddress
        if self.netcondLink {
            let box = NIOLoopBoundBox.makeBoxSendingValue(
                ToxicConnections(seed: seed, toxics: entry.toxics, tally: tally), eventLoop: loop)
            let conditions = ToxicConditions(toxics: entry.toxics, name: entry.name)
            var configuration = ProxyConfiguration(
                profile: conditions.profile, seed: SeedDeriver.derive(self.seed, entry.index, 1),
                forwards: [
                    PortForward(listenHost: host, listenPort: port, targetHost: targetHost, targetPort: targetPort)
                ],
                controllable: true)
            configuration.servesProxy = false
            // A proxy whose upstream is down accepts and closes (a FIN), as Toxiproxy does: suites dial
            // a proxy to see that it is up, and a reset would fail their connect now and then.
            configuration.forwardClosesOnUpstreamFailure = true
            configuration.forwardConnectionHook = { channel, _ in try box.value.attachForward(to: channel) }
            let server = ProxyServer(configuration: configuration, group: loop)
            let addresses: ProxyAddresses
            do {
                addresses = try await server.start()
            } catch let error as ProxyStartError where error.addressInUse {
                await server.stop()
                // Toxiproxy's (Go's) words, as the relay's own listener gives them.
                throw ToxiproxyError(message: "listen tcp \(host):\(port): bind: address already in use", status: 500)
            } catch {
                await server.stop()
                throw ToxiproxyError(message: "\(error)", status: 500)
            }
            if let stall = conditions.stall { await server.apply(.stall(stall)) }
            entry.server = server
            entry.connections = box
            guard let first = addresses.forwards.first else { return }
            bound = first
        } else {
            let relay = ToxicRelay(
                name: entry.name, upstream: (targetHost, targetPort), seed: seed, toxics: entry.toxics, eventLoop: loop,
                tally: tally)
            do {
                bound = try await relay.start(host: host, port: port)
            } catch {
                throw ToxiproxyError(message: "\(error)", status: 500)
            }
            entry.relay = relay
            entry.connections = relay.connections
        }
        entry.tally = tally
        if let ip = bound.ipAddress, let boundPort = bound.port {
            entry.listen = ListenerExposure.display(ip, boundPort)
            if !HostAddress.isLoopback(ip) {
                let line =
                    "netcond: warning: Toxiproxy proxy \(entry.name) listens on \(entry.listen), not only on loopback: "
                    + "anyone who can reach this machine on that port is relayed to \(entry.upstream), with no "
                    + "authentication; to keep it to this machine: listen 127.0.0.1:\(boundPort)\n"
                FileHandle.standardError.write(Data(line.utf8))
            }
        }
    }

    private func close(_ entry: Entry) async {
        await entry.server?.stop()
        await entry.relay?.stop()
        entry.server = nil
        entry.relay = nil
        entry.connections = nil
        entry.tally = nil
    }

    /// The proxy's toxics become `toxics`: its link and each open connection follow at once.
    private func setToxics(_ entry: Entry, _ toxics: [Toxic]) async throws {
        let before = ToxicConditions(toxics: entry.toxics, name: entry.name)
        entry.toxics = toxics
        guard let connections = entry.connections else { return }
        if let server = entry.server {
            let after = ToxicConditions(toxics: toxics, name: entry.name)
            if after.profile != before.profile { await server.apply(.switchProfile(after.profile)) }
            if after.stall != before.stall { await server.apply(.stall(after.stall)) }
        }
        let loop = entry.relay?.eventLoop ?? entry.server?.eventLoop
        try await loop?.submit { connections.value.update(toxics) }.get()
    }
}
