import Foundation
import NIOHTTP1

/// One part of the origin's URL space, owning the paths under `/{name}/…`. Endpoints are small pure types: a request
/// in, an ``OriginResponse`` out; the router checks the method and handles HEAD for them.
protocol OriginEndpoint: Sendable {
    /// The first path segment this endpoint owns (`"bytes"` for `/bytes/200KB`).
    var name: String { get }
    /// Methods it answers. HEAD is implied by GET.
    var methods: [HTTPMethod] { get }
    /// For the index page: how to call it (`/bytes/{size}[?seed=N]`) and what it does.
    var usage: (pattern: String, summary: String) { get }
    /// Answers `request`, whose path segments after `name` are `arguments`.
    func respond(to request: OriginRequest, arguments: ArraySlice<Substring>) -> OriginResponse
}

/// Maps a request to the endpoint that answers it — the one place that knows the URL space — and applies the rules
/// shared by all endpoints: 404 for unknown paths, 405 with `Allow` for other methods, HEAD = GET without the body.
struct OriginRouter: Sendable {
    let endpoints: [any OriginEndpoint]
    /// The scenario's origin faults, decided for every request before its endpoint answers.
    let faults: OriginFaults?

    init(endpoints: [any OriginEndpoint], faults: OriginFaults? = nil) {
        self.endpoints = endpoints
        self.faults = faults
    }

    /// The standard origin: `/bytes`, `/status`, `/delay`, and the scenario's `/files` and `/api`.
    init(configuration: OriginConfiguration) {
        self.init(
            endpoints: [
                BytesEndpoint(maximumSize: configuration.maximumSize.bytes, lastModified: configuration.lastModified),
                StatusEndpoint(),
                DelayEndpoint(maximumDelay: configuration.maximumDelay),
                FilesEndpoint(content: configuration.content, lastModified: configuration.lastModified),
                APIEndpoint(content: configuration.content, lastModified: configuration.lastModified),
            ],
            faults: configuration.content.faults.isEmpty && configuration.routes == nil
                ? nil
                : OriginFaults(
                    faults: configuration.content.faults, routes: configuration.routes ?? [],
                    seed: configuration.faultSeed, clock: configuration.clock))
    }

    /// The answer to `request`, with the origin fault that hits it (if any) applied.
    func response(for request: OriginRequest) -> OriginResponse {
        guard let action = self.faults?.decide(request) else { return self.endpointResponse(for: request) }
        if case .status(let code, let retryAfter) = action {
            var response = OriginResponse.fault(status: code, retryAfter: retryAfter, target: request.target)
            if request.method == .HEAD { response.body = .none }
            response.fault = action
            return response
        }
        var response = self.endpointResponse(for: request)
        if case .cut(let bytes, _) = action, response.body.count <= bytes.bytes {
            return response  // nothing to cut (a HEAD, a 304, a shorter body): the fault does nothing here
        }
        response.apply(action)
        response.fault = action
        return response
    }

    private func endpointResponse(for request: OriginRequest) -> OriginResponse {
        guard let segments = request.segments else {
            return .text(.badRequest, "request target must be a path starting with '/'\n")
        }
        let allowed: [HTTPMethod]
        let answer: () -> OriginResponse
        if let first = segments.first {
            guard let endpoint = self.endpoints.first(where: { $0.name == first }) else {
                return .text(.notFound, "no such resource: \(request.target)\nsee / for the list of endpoints\n")
            }
            allowed = endpoint.methods
            answer = { endpoint.respond(to: request, arguments: segments.dropFirst()) }
        } else {
            allowed = [.GET]
            answer = { .text(.ok, self.index) }
        }
        let allowHeader = Self.allowHeader(allowed)
        let answersHead = allowed.contains(.GET) || allowed.contains(.HEAD)
        guard allowed.contains(request.method) || (request.method == .HEAD && answersHead) else {
            return .text(
                .methodNotAllowed, "method \(request.method.rawValue) not allowed; use \(allowHeader)\n",
                headers: ["Allow": allowHeader])
        }
        var response = answer()
        if request.method == .HEAD {
            // Same headers as GET, Content-Length included; no body bytes.
            response.body = .none
        }
        return response
    }

    /// The plain-text index served at `/`.
    var index: String {
        let lines = [(pattern: "/", summary: "this list")] + self.endpoints.map(\.usage)
        let width = lines.map(\.pattern.count).max() ?? 0
        var text = "netcond origin (GET or HEAD; POST to the /api endpoints that take it)\n\n"
        for line in lines {
            text += "  " + line.pattern.padding(toLength: width + 2, withPad: " ", startingAt: 0) + line.summary + "\n"
        }
        return text
    }

    static func allowHeader(_ methods: [HTTPMethod]) -> String {
        var all = methods
        if all.contains(.GET) && !all.contains(.HEAD) {
            all.insert(.HEAD, at: all.firstIndex(of: .GET).map { $0 + 1 } ?? all.endIndex)
        }
        return all.map(\.rawValue).joined(separator: ", ")
    }
}
