import Foundation
import NetcondTLS
import NetcondTesting
import Testing

/// NetcondTesting builds without a TLS library; a test that wants HTTPS passes one (`tls: .nioSSL`).
@Suite struct TLSTests {
    /// A profile whose captive portal answers HTTPS with its own certificate, as a user writes it.
    /// The file is removed at once: a profile is read when the network starts or switches, so
    /// `body` gets it while the file exists.
    static func withWrongCertificatePortal(_ body: (NetworkProfile) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-tls-\(UUID().uuidString).yaml"
        ).path
        try "name: portal-tls\ncaptive_portal: {https: wrong-certificate}\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await body(.file(path))
    }

    /// `CONNECT origin.netcond.test:443` through the network's proxy: the proxy's status line.
    static func connectToTheOriginsHTTPS(_ network: ConditionedNetwork) throws -> String {
        let socket = try TCPClient(host: "127.0.0.1", port: UInt16(network.proxyURL.port ?? 0))
        defer { socket.close() }
        try socket.send("CONNECT origin.netcond.test:443 HTTP/1.1\r\nHost: origin.netcond.test:443\r\n\r\n")
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count < 200, recv(socket.fd, &byte, 1, 0) == 1, byte != 10 { line.append(byte) }
        return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func withoutTLSTheOriginsHTTPSPortIsClosedAndNoCAIsHandedOut() async throws {
        let network = try await Netcond.start(profile: .none)
        let status: String
        do {
            status = try Self.connectToTheOriginsHTTPS(network)
        } catch {
            await network.stop()
            throw error
        }
        let environment = network.environment
        await network.stop()
        // A closed port: the tunnel's connection is reset, as a refused one is (no answer of netcond's own).
        #expect(status == "", "\(status)")
        #expect(environment["NETCOND_CA"] == nil)
    }

    @Test func withoutTLSAPortalWithTheWrongCertificateIsRefusedSayingWhatToAdd() async throws {
        try await Self.withWrongCertificatePortal { profile in
            do {
                let network = try await Netcond.start(profile: profile)
                await network.stop()
                Issue.record("a wrong-certificate portal started without a TLS library")
            } catch {
                let text = String(describing: error)
                #expect(
                    text.contains("wrong-certificate") && text.contains("NetcondTLS") && text.contains("tls: .nioSSL"),
                    "\(text)")
            }
            // Switched to later, the same.
            let network = try await Netcond.start(profile: .none)
            await #expect(throws: NetcondTestingError.self) { try await network.switchProfile(to: profile) }
            await network.stop()
        }
    }

    @Test func withTLSTheOriginServesHTTPSToAClientThatTrustsTheRunsCA() async throws {
        let network = try await Netcond.start(profile: .none, tls: .nioSSL)
        let environment = network.environment
        let status = try? Self.connectToTheOriginsHTTPS(network)  // nil fails the expectation below
        // A real HTTPS client, given the run's variables (proxy and CA bundle).
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        curl.arguments = ["curl", "-sS", "--max-time", "20", "https://origin.netcond.test/bytes/5"]
        curl.environment = environment
        let output = Pipe()
        curl.standardOutput = output
        curl.standardError = output
        try curl.run()
        curl.waitUntilExit()
        let body = output.fileHandleForReading.readDataToEndOfFile()
        // And a portal with the wrong certificate may be switched to.
        try await Self.withWrongCertificatePortal { profile in
            await #expect(throws: Never.self) { try await network.switchProfile(to: profile) }
        }
        await network.stop()
        #expect(status?.hasPrefix("HTTP/1.1 200") == true, "\(status ?? "no answer")")
        #expect(environment["NETCOND_CA"] != nil)
        #expect(curl.terminationStatus == 0 && body.count == 5, "curl: \(String(decoding: body, as: UTF8.self))")
    }
}
