import Foundation
import NIOCore
import NIOSSL
import NetcondProxy

#if canImport(Glibc)
import Glibc
#endif

/// HTTPS for the built-in origin: a CA made for this run, a certificate for `origin.netcond.test`
/// it signs, and the files a client is pointed at so that it trusts them — a bundle of the
/// system's CAs plus this one (`SSL_CERT_FILE`, `CURL_CA_BUNDLE`, `REQUESTS_CA_BUNDLE`: the
/// system CAs stay trusted) and the CA alone (`NODE_EXTRA_CA_CERTS`, which Node adds to its own).
/// The files live in a private temporary folder removed by ``remove()``.
public final class OriginTrust: Sendable {
    /// The folder holding `ca.pem` and `bundle.pem`.
    public let directory: String
    public let caPath: String
    public let bundlePath: String
    /// Where the system's CAs in the bundle came from (nil: none found; the bundle has only the run's CA).
    public let systemBundle: String?
    let context: NIOSSLContext

    /// Where Debian, Fedora, Alpine and macOS keep the system CA bundle.
    static let systemBundles = [
        "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem",
    ]

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Makes the CA and the certificate and writes the files. `existing`: a bundle the user already
    /// points clients at (`SSL_CERT_FILE`), kept in place of the system's.
    public init(host: String, existing: String? = nil) throws {
        let ca = try ThrowawayCA(name: "netcond origin CA (this run only)")
        let issued = try ca.issue(for: [host])
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: issued.chain.map { .certificate($0) }, privateKey: .privateKey(issued.key))
        configuration.applicationProtocols = ["http/1.1"]
        self.context = try NIOSSLContext(configuration: configuration)

        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/netcond-tls-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "cannot create a folder for the HTTPS origin's CA in \(base): \(String(cString: strerror(errno)))")
        }
        self.directory = String(cString: made)
        self.caPath = self.directory + "/ca.pem"
        self.bundlePath = self.directory + "/bundle.pem"
        let candidates = (existing.map { [$0] } ?? []) + Self.systemBundles
        self.systemBundle = candidates.first { FileManager.default.isReadableFile(atPath: $0) }
        do {
            let pem = try ca.certificatePEM()
            var bundle = self.systemBundle.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
            if !bundle.isEmpty && !bundle.hasSuffix("\n") { bundle += "\n" }
            bundle += "# netcond origin CA (this run only)\n" + pem
            try pem.write(toFile: self.caPath, atomically: false, encoding: .utf8)
            try bundle.write(toFile: self.bundlePath, atomically: false, encoding: .utf8)
        } catch {
            try? FileManager.default.removeItem(atPath: self.directory)
            throw Failure(description: "cannot write the HTTPS origin's CA to \(self.directory): \(error)")
        }
    }

    /// Adds TLS in front of an origin connection.
    func prepare(_ channel: Channel) throws {
        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: self.context))
    }

    /// The variables that make clients trust the origin.
    public var environment: [String: String] {
        [
            "SSL_CERT_FILE": self.bundlePath, "CURL_CA_BUNDLE": self.bundlePath, "REQUESTS_CA_BUNDLE": self.bundlePath,
            "NODE_EXTRA_CA_CERTS": self.caPath, "NETCOND_CA": self.caPath,
        ]
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}
