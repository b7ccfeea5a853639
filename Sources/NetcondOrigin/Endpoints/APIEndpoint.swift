import NIOHTTP1
import NetcondCore

/// `/api/{name}` — a scenario's JSON endpoints. A GET endpoint answers its JSON. A POST endpoint
/// creates an object per call (201 `{"id": N}`), the side effect the `idempotent` check counts;
/// a call whose `Idempotency-Key` was seen before creates nothing and answers the first call's
/// object again (200, `Idempotent-Replayed: true`). The scenario's origin faults (`{api: NAME, …}`)
/// are the router's: `drop_response` does the work and then loses the answer.
///
/// A GET endpoint's answer carries validators (``Validators``: an `ETag` from its JSON, the
/// origin's `Last-Modified`) and `Cache-Control: no-cache`, as a feed's API does: a client asks
/// each time whether it changed, and a conditional GET of an unchanged endpoint is answered 304.
struct APIEndpoint: OriginEndpoint {
    let content: OriginContent
    var lastModified = "Mon, 01 Jan 2024 00:00:00 GMT"

    private struct State {
        var created: [String: Int] = [:]
        /// (endpoint, key) → the object the first call with that key created.
        var keys: [String: [String: Int]] = [:]
    }

    private let state = LockedBox(State())

    var name: String { "api" }
    var methods: [HTTPMethod] { [.GET, .POST] }
    var usage: (pattern: String, summary: String) {
        let names = self.content.api.map { "\($0.method.rawValue) \($0.path)" }
        return (
            "/api/{name}",
            names.isEmpty
                ? "the scenario's JSON endpoints (none in this run)"
                : "the scenario's JSON endpoints: \(names.joined(separator: ", "))"
        )
    }

    func respond(to request: OriginRequest, arguments: ArraySlice<Substring>) -> OriginResponse {
        guard arguments.count == 1, let name = arguments.first, let api = self.content.api(named: String(name)) else {
            let known = self.content.api.map(\.path).joined(separator: ", ")
            return .text(
                .notFound,
                "no such endpoint: \(request.target)\nendpoints in this run: \(known.isEmpty ? "none" : known)\n")
        }
        switch (api.method, request.method) {
        case (.get, .HEAD), (.get, .GET):
            let body = Self.body(of: api)
            let validators = Validators(etag: Self.etag(of: body), lastModified: self.lastModified)
            var headers = validators.headers
            headers.add(name: "Cache-Control", value: "no-cache")
            if validators.notModified(request) { return .empty(.notModified, headers: headers) }
            return .json(.ok, body, headers: headers)
        case (.post, .POST):
            break
        case (.post, .GET), (.post, .HEAD):
            let created = self.state.withLock { $0.created[api.name] ?? 0 }
            return .json(.ok, "{\"endpoint\": \"\(api.name)\", \"created\": \(created)}\n")
        default:
            return .text(
                .methodNotAllowed, "\(api.path) answers \(api.method.rawValue)\n",
                headers: ["Allow": api.method.rawValue])
        }
        let key = request.headers.first(name: "idempotency-key")
        let effect = self.state.withLock { state -> OriginEffect in
            if let key, let earlier = state.keys[api.name]?[key] { return .replayed(earlier) }
            state.created[api.name, default: 0] += 1
            let id = state.created[api.name]!
            if let key { state.keys[api.name, default: [:]][key] = id }
            return .created(id)
        }
        var response: OriginResponse
        switch effect {
        case .created(let id):
            response = .json(.created, "{\"id\": \(id)}\n", headers: ["Location": "\(api.path)/\(id)"])
        case .replayed(let id):
            response = .json(.ok, "{\"id\": \(id)}\n", headers: ["Idempotent-Replayed": "true"])
        }
        response.effect = effect
        return response
    }

    /// A strong tag of the answer's bytes (FNV-1a, 64 bits): the same JSON, the same tag.
    static func etag(of body: String) -> EntityTag {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return EntityTag(opaque: Substring("api-" + String(repeating: "0", count: 16 - hex.count) + hex))
    }

    /// What a GET endpoint answers: its JSON, or a small default naming it.
    private static func body(of api: OriginAPI) -> String {
        (api.json ?? "{\"endpoint\": \"\(api.name)\", \"ok\": true}") + "\n"
    }
}
