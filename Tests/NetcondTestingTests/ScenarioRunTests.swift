import Foundation
import NetcondTesting
import Testing

/// A scenario judged against a client written in Swift, in this process: the shipped
/// resume-after-dropout (a 2 MB file over LTE, cut once at 600 KB).
@Suite struct ScenarioRunTests {
    /// GET `url` to the end; after a drop, asks again — for the rest (`resume`) or from the start.
    static func download(_ url: URL, resume: Bool, log: (String) -> Void) throws -> [UInt8] {
        var data: [UInt8] = []
        for _ in 0..<5 {
            let socket = try TCPClient(host: url.host ?? "127.0.0.1", port: UInt16(url.port ?? 80))
            defer { socket.close() }
            let range = resume && !data.isEmpty ? "Range: bytes=\(data.count)-\r\n" : ""
            try socket.send("GET \(url.path) HTTP/1.1\r\nHost: origin\r\n\(range)Connection: close\r\n\r\n")
            let response = (try? socket.readBytesToEnd()) ?? socket.received
            guard let split = response.indices.first(where: { response[$0...].starts(with: Array("\r\n\r\n".utf8)) })
            else { continue }
            let head = String(decoding: response[..<split], as: UTF8.self)
            let body = Array(response[(split + 4)...])
            let length =
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? -1
            if head.hasPrefix("HTTP/1.1 206") { data += body } else { data = body }
            log("got \(body.count) of \(length) (\(head.split(separator: "\r\n").first ?? ""))")
            if body.count == length { return data }
        }
        throw NetcondTestingTestError.receiveFailed(0)
    }

    static func client(resume: Bool) -> @Sendable (ScenarioClientContext) async throws -> Void {
        { context in
            let url = try #require(context.url)
            let data = try Self.download(url, resume: resume, log: context.log)
            try Data(data).write(to: URL(fileURLWithPath: try #require(context.outputPath)))
        }
    }

    @Test func aClientThatResumesPassesAndOneThatStartsOverFails() async throws {
        let scenario = "Scenarios/resume-after-dropout.yaml"
        let good = try await Netcond.run(scenario: scenario, seed: 5, client: Self.client(resume: true))
        #expect(good.passed, "\(good.verdictText)")
        #expect(good.results.map(\.name) == ["completes", "resumes"])
        let bad = try await Netcond.run(scenario: scenario, seed: 5, client: Self.client(resume: false))
        #expect(!bad.passed)
        let resumes = try #require(bad.results.first { $0.name == "resumes" })
        #expect(!resumes.passed && resumes.evidence.contains("whole file again"), "\(resumes.evidence)")
        // Its output lines are the client's, in the evidence.
        #expect(bad.evidence.lines.contains { $0.text.hasPrefix("got ") })
    }

    @Test func aClientThatThrowsExitsOne() async throws {
        let report = try await Netcond.run(scenario: "Scenarios/resume-after-dropout.yaml", seed: 5) { _ in
            throw NetcondTestingTestError.sendFailed(0)
        }
        let completes = try #require(report.results.first { $0.name == "completes" })
        #expect(!completes.passed && completes.evidence.contains("exit 1"), "\(completes.evidence)")
    }
}
