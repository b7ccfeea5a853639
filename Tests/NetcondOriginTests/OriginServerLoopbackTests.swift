import Foundation
import NIOCore
import NIOPosix
import NetcondCore
import Testing

@testable import NetcondOrigin

/// Runs `body` against a fresh origin on 127.0.0.1:0 and always stops it.
func withOrigin<Result>(
    _ configuration: OriginConfiguration = .init(),
    _ body: (OriginServer, SocketAddress) async throws -> Result
) async throws -> Result {
    let server = OriginServer(configuration: configuration)
    let address = try await server.start(group: MultiThreadedEventLoopGroup.singleton, host: "127.0.0.1", port: 0)
    do {
        let result = try await body(server, address)
        try await server.stop()
        return result
    } catch {
        try? await server.stop()
        throw error
    }
}

/// Polls `condition` every 10 ms, at most `attempts` times (the log is updated from write completions, which may
/// run a moment after the client has read the bytes).
func eventually(attempts: Int = 300, _ condition: () -> Bool) async throws -> Bool {
    for _ in 0..<attempts {
        if condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Real sockets on loopback: the full NIO pipeline, a raw client, exact bytes.
@Suite("OriginServer on loopback")
struct OriginServerLoopbackTests {
    @Test("GET /bytes/200KB: the body is exactly DeterministicBytes")
    func fullBody() async throws {
        try await withOrigin { server, address in
            #expect(address.ipAddress == "127.0.0.1")
            #expect(address.port != 0)
            let response = try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("/bytes/200KB?seed=5")
                return try await connection.readResponse()
            }
            #expect(response.status == 200)
            #expect(response.header("Content-Length") == "204800")
            #expect(response.header("ETag") == "\"204800-5\"")
            #expect(response.header("Content-Type") == "application/octet-stream")
            #expect(response.header("Accept-Ranges") == "bytes")
            #expect(response.body.count == 204_800)
            #expect(response.body == DeterministicBytes(seed: 5).bytes(offset: 0, count: 204_800))
            #expect(try await eventually { server.requestLog.entries.first?.completed == true })
            #expect(server.requestLog.entries.first?.bodyBytesSent == 204_800)
        }
    }

    @Test("Range → 206 with exactly the slice; unsatisfiable → 416")
    func ranges() async throws {
        try await withOrigin { _, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("/bytes/1MB", headers: ["Range: bytes=1000-70999"])
                let partial = try await connection.readResponse()
                #expect(partial.status == 206)
                #expect(partial.header("Content-Range") == "bytes 1000-70999/1048576")
                #expect(partial.body == DeterministicBytes(seed: 0).bytes(offset: 1000, count: 70_000))

                try await connection.sendRequest("/bytes/1MB", headers: ["Range: bytes=-3"])
                let suffix = try await connection.readResponse()
                #expect(suffix.body == DeterministicBytes(seed: 0).bytes(offset: 1_048_573, count: 3))

                try await connection.sendRequest("/bytes/1MB", headers: ["Range: bytes=1048576-"])
                let unsatisfiable = try await connection.readResponse()
                #expect(unsatisfiable.status == 416)
                #expect(unsatisfiable.header("Content-Range") == "bytes */1048576")
            }
        }
    }

    @Test("If-None-Match → 304 without body; If-Range mismatch → 200 full")
    func conditionals() async throws {
        try await withOrigin { _, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("/bytes/1000", headers: ["If-None-Match: W/\"1000-0\""])
                let notModified = try await connection.readResponse()
                #expect(notModified.status == 304)
                #expect(notModified.body.isEmpty)
                #expect(notModified.header("ETag") == "\"1000-0\"")

                try await connection.sendRequest("/bytes/1000", headers: ["Range: bytes=500-", "If-Range: \"1000-1\""])
                let full = try await connection.readResponse()
                #expect(full.status == 200)
                #expect(full.header("Content-Range") == nil)
                #expect(full.body == DeterministicBytes(seed: 0).bytes(offset: 0, count: 1000))

                try await connection.sendRequest("/bytes/1000", headers: ["Range: bytes=500-", "If-Range: \"1000-0\""])
                let partial = try await connection.readResponse()
                #expect(partial.status == 206)
                #expect(partial.body == DeterministicBytes(seed: 0).bytes(offset: 500, count: 500))
            }
        }
    }

    @Test("HEAD and keep-alive: several requests on one connection, logged on one connection id")
    func headAndKeepAlive() async throws {
        try await withOrigin { server, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("HEAD", "/bytes/64KB")
                let head = try await connection.readResponse(isHead: true)
                #expect(head.status == 200)
                #expect(head.header("Content-Length") == "65536")
                try await connection.sendRequest("/bytes/10?seed=3")
                let get = try await connection.readResponse()
                #expect(get.body == DeterministicBytes(seed: 3).bytes(offset: 0, count: 10))
                try await connection.sendRequest("/")
                let index = try await connection.readResponse()
                #expect(String(decoding: index.body, as: UTF8.self).contains("/bytes/{size}"))
                #expect(!connection.sawEndOfStream)
            }
            #expect(try await eventually { server.requestLog.entries.filter(\.completed).count == 3 })
            let entries = server.requestLog.entries
            #expect(entries.map(\.method) == ["HEAD", "GET", "GET"])
            #expect(entries.map(\.connection) == [0, 0, 0])
            #expect(entries[0].bodyBytesSent == 0)
        }
    }

    @Test("pipelined requests are answered in order")
    func pipelining() async throws {
        try await withOrigin { _, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.send(
                    "GET /bytes/100000?seed=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /status/418 HTTP/1.1\r\nHost: x\r\n\r\n")
                let first = try await connection.readResponse()
                let second = try await connection.readResponse()
                #expect(first.body == DeterministicBytes(seed: 1).bytes(offset: 0, count: 100_000))
                #expect(second.status == 418)
            }
        }
    }

    @Test("Connection: close → the server closes after the response")
    func connectionClose() async throws {
        try await withOrigin { _, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("/status/200", headers: ["Connection: close"])
                let response = try await connection.readResponse()
                #expect(response.header("Connection") == "close")
                #expect(try await connection.readUntilClosed().isEmpty)
            }
        }
    }

    @Test("a client that half-closes after its request still gets the whole response, then the server closes")
    func halfClose() async throws {
        try await withOrigin { _, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("/bytes/300000?seed=8")
                connection.finishSending()
                let response = try await connection.readResponse()
                #expect(response.body == DeterministicBytes(seed: 8).bytes(offset: 0, count: 300_000))
                #expect(try await connection.readUntilClosed().isEmpty)
            }
        }
    }

    @Test("/delay/300ms answers no earlier than the delay")
    func delay() async throws {
        try await withOrigin { _, address in
            try await RawHTTPConnection.with(address) { connection in
                let clock = ContinuousClock()
                let start = clock.now
                try await connection.sendRequest("/delay/300ms")
                let response = try await connection.readResponse()
                let elapsed = clock.now - start
                #expect(response.status == 200)
                #expect(String(decoding: response.body, as: UTF8.self) == "{\"delay_ms\": 300}\n")
                #expect(elapsed >= .milliseconds(300))
            }
        }
    }

    @Test("404, 405 with Allow, 400 with a reason; malformed HTTP gets 400 and the server keeps serving")
    func errors() async throws {
        try await withOrigin { _, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("/nothing-here")
                #expect(try await connection.readResponse().status == 404)
                try await connection.send("POST /bytes/1KB HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
                let notAllowed = try await connection.readResponse()
                #expect(notAllowed.status == 405)
                #expect(notAllowed.header("Allow") == "GET, HEAD")
                try await connection.sendRequest("/bytes/12XB")
                let badRequest = try await connection.readResponse()
                #expect(badRequest.status == 400)
                #expect(String(decoding: badRequest.body, as: UTF8.self).contains("unknown unit 'XB'"))
            }

            try await RawHTTPConnection.with(address) { garbage in
                try await garbage.send("THIS IS NOT HTTP\r\n\u{01}\u{02}\r\n\r\n")
                #expect(try await garbage.readResponse().status == 400)
            }

            try await RawHTTPConnection.with(address) { after in
                try await after.sendRequest("/status/204")
                #expect(try await after.readResponse().status == 204)
            }
        }
    }

    @Test("a slow reader is not served ahead: a 1 GB body is generated only as fast as it is read")
    func backpressure() async throws {
        try await withOrigin { server, address in
            try await RawHTTPConnection.with(address) { connection in
                try await connection.sendRequest("/bytes/1GB?seed=2")
                let start = try await connection.readRaw(atLeast: 1)
                #expect(!start.isEmpty)
                // Give the server time to fill every buffer it can.
                try await Task.sleep(for: .milliseconds(300))
                let sent = server.requestLog.entries.first?.bodyBytesSent ?? -1
                #expect(sent >= 0 && sent < 64 << 20, "sent \(sent) bytes to a client that read almost none")
            }
            #expect(try await eventually { server.requestLog.entries.first?.isFinished == true })
            let entry = try #require(server.requestLog.entries.first)
            #expect(!entry.completed && entry.status == 200 && entry.bodyBytesSent < 1 << 30)
        }
    }

    @Test("stop() closes open connections and the listener; start() twice is refused")
    func stopClosesEverything() async throws {
        let server = OriginServer()
        let address = try await server.start(group: MultiThreadedEventLoopGroup.singleton)
        await #expect(throws: OriginServerError.alreadyStarted) {
            try await server.start(group: MultiThreadedEventLoopGroup.singleton)
        }
        try await RawHTTPConnection.with(address) { connection in
            try await connection.sendRequest("/delay/30s")
            #expect(try await eventually { server.requestLog.count == 1 })
            try await server.stop()
            #expect(try await connection.readUntilClosed().isEmpty)
        }
        #expect(server.requestLog.entries.first?.completed == false)
        #expect(server.localAddress == nil)
        try await server.stop()
    }

    @Test("the origin's connections are born with the configured congestion control; an unknown one leaves the default")
    func congestionControl() async throws {
        let available =
            (try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_available_congestion_control", encoding: .utf8))?
            .split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? []
        // reno is built into every Linux kernel; the other one this host offers, when there is one.
        for name in ["reno"] + available.filter({ $0 != "reno" }).prefix(1) {
            let chosen = try await withOrigin(OriginConfiguration(congestionControl: name)) { server, _ in
                await server.congestionControl()
            }
            #expect(chosen == name)
        }
        let unknown = try await withOrigin(OriginConfiguration(congestionControl: "no-such-algorithm")) { server, _ in
            await server.congestionControl()
        }
        #expect(unknown == SenderCongestionControl.hostDefault)
        // A live switch gives new connections another (a profile's tcp changed).
        let switched = try await withOrigin(OriginConfiguration(congestionControl: "reno")) { server, _ in
            await server.setCongestionControl("cubic")
            return await server.congestionControl()
        }
        #expect(switched == (available.contains("cubic") ? "cubic" : "reno"))
    }
}
