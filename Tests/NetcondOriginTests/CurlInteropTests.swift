import Foundation
import NIOCore
import Testing

@testable import NetcondOrigin

/// The curl binary, if this machine has one.
private let curlPath: String? = ["/usr/bin/curl", "/usr/local/bin/curl", "/bin/curl"].first {
    FileManager.default.isExecutableFile(atPath: $0)
}

/// Runs curl with `arguments` (bounded by `--max-time`); returns its exit status.
private func runCurl(_ arguments: [String]) async throws -> Int32 {
    guard let curlPath else { return -1 }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: curlPath)
    process.arguments = ["--silent", "--noproxy", "*", "--max-time", "30"] + arguments
    process.standardError = FileHandle.nullDevice
    return try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { process in
            continuation.resume(returning: process.terminationStatus)
        }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
}

/// A real client against the real server: what `netcond run edge -- curl -o …` relies on.
@Suite("curl against the origin", .enabled(if: curlPath != nil, "needs curl"))
struct CurlInteropTests {
    @Test("curl -o downloads exact bytes, and curl -C - resumes a cut download with a Range request")
    func downloadAndResume() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-origin-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("x").path
        let expected = DeterministicBytes(seed: 4).bytes(offset: 0, count: 300 * 1024)

        try await withOrigin { server, address in
            let url = "http://127.0.0.1:\(address.port ?? 0)/bytes/300KB?seed=4"
            #expect(try await runCurl(["-o", file, url]) == 0)
            #expect(FileManager.default.contents(atPath: file).map { [UInt8]($0) } == expected)

            // Cut the file as a dropped connection would, then resume.
            try Data(expected[..<100_000]).write(to: URL(fileURLWithPath: file))
            #expect(try await runCurl(["-C", "-", "-o", file, url]) == 0)
            #expect(FileManager.default.contents(atPath: file).map { [UInt8]($0) } == expected)

            #expect(try await eventually { server.requestLog.entries.filter(\.isFinished).count == 2 })
            let entries = server.requestLog.entries
            #expect(entries.map(\.status) == [200, 206])
            #expect(entries[1].headers.range == "bytes=100000-")
            #expect(entries[1].bodyBytesSent == Int64(expected.count - 100_000))
        }
    }

    @Test("curl -I (HEAD) and curl --http1.0")
    func headAndHTTP10() async throws {
        try await withOrigin { _, address in
            let base = "http://127.0.0.1:\(address.port ?? 0)"
            let head = try await runCurl(["-I", "-o", "/dev/null", "--fail", base + "/bytes/1GB"])
            let http10 = try await runCurl(["--http1.0", "-o", "/dev/null", "--fail", base + "/bytes/10KB"])
            let serverError = try await runCurl(["-o", "/dev/null", "--fail", base + "/status/503"])
            #expect(head == 0)
            #expect(http10 == 0)
            #expect(serverError == 22)
        }
    }
}
