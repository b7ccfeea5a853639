import NIOHTTP1
import NetcondCore

/// `GET /files/{name}` — the scenario's named files (fixed size and seed), served like `/bytes` (ETag, Range,
/// If-None-Match, If-Range), with the scenario's origin faults applied by request number: the k-th GET of a file
/// may be cut after N body bytes, answered with an error status (and `Retry-After`), or never answered.
struct FilesEndpoint: OriginEndpoint {
    let content: OriginContent
    let lastModified: String
    /// GETs seen per file name.
    let requestCounts = LockedBox<[String: Int]>([:])

    var name: String { "files" }
    var methods: [HTTPMethod] { [.GET] }
    var usage: (pattern: String, summary: String) {
        let names = self.content.files.map(\.name)
        return ("/files/{name}", names.isEmpty ? "the scenario's files (none in this run)" : "the scenario's files: \(names.joined(separator: ", "))")
    }

    func respond(to request: OriginRequest, arguments: ArraySlice<Substring>) -> OriginResponse {
        guard arguments.count == 1, let name = arguments.first, let file = self.content.file(named: String(name)) else {
            let known = self.content.files.map(\.path).joined(separator: ", ")
            return .text(.notFound, "no such file: \(request.target)\nfiles in this run: \(known.isEmpty ? "none" : known)\n")
        }
        var response = BytesEndpoint.serveFile(request, size: file.size.bytes, seed: file.seed, lastModified: self.lastModified)
        guard request.method == .GET else { return response }
        let number = self.requestCounts.withLock { counts in
            counts[file.name, default: 0] += 1
            return counts[file.name]!
        }
        guard let fault = self.content.fault(for: .file(file.name), request: number) else {
            return response
        }
        response.apply(fault.action, describing: "request \(number) for \(file.name)")
        return response
    }
}
