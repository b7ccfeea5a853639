import NIOHTTP1
import NetcondCore

/// `GET /files/{name}` — the scenario's named files (fixed size and seed), served like `/bytes` (ETag, Range,
/// If-None-Match, If-Range). The scenario's origin faults (`{file: NAME, …}`) are the router's.
struct FilesEndpoint: OriginEndpoint {
    let content: OriginContent
    let lastModified: String

    var name: String { "files" }
    var methods: [HTTPMethod] { [.GET] }
    var usage: (pattern: String, summary: String) {
        let names = self.content.files.map(\.name)
        return (
            "/files/{name}",
            names.isEmpty
                ? "the scenario's files (none in this run)" : "the scenario's files: \(names.joined(separator: ", "))"
        )
    }

    func respond(to request: OriginRequest, arguments: ArraySlice<Substring>) -> OriginResponse {
        guard arguments.count == 1, let name = arguments.first, let file = self.content.file(named: String(name)) else {
            let known = self.content.files.map(\.path).joined(separator: ", ")
            return .text(
                .notFound, "no such file: \(request.target)\nfiles in this run: \(known.isEmpty ? "none" : known)\n")
        }
        return BytesEndpoint.serveFile(request, size: file.size.bytes, seed: file.seed, lastModified: self.lastModified)
    }
}
