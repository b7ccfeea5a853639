import Foundation
import NIOCore
import NetcondCore
import NetcondProxy

#if canImport(Glibc)
import Glibc
#endif

/// HTTPS for the built-in origin: a CA made for this run, a certificate it signs for
/// `origin.netcond.test` and `*.netcond.test` (every name under `netcond.test` reaches the origin), and the files a client is pointed at so that it trusts them — a bundle of the
/// system's CAs plus this one (`SSL_CERT_FILE`, `CURL_CA_BUNDLE`, `REQUESTS_CA_BUNDLE`: the
/// system CAs stay trusted) and the CA alone (`NODE_EXTRA_CA_CERTS`, which Node adds to its own).
/// The files live in a private temporary folder removed by ``remove()``.
public final class OriginTrust: Sendable {
    /// The folder holding `ca.pem`, `bundle.pem` and `node.pem`.
    public let directory: String
    public let caPath: String
    public let bundlePath: String
    /// `NODE_EXTRA_CA_CERTS`: the run's CA, after the user's own extra CAs when they had some.
    public let nodePath: String
    /// The CA files the bundle starts with: the user's (`SSL_CERT_FILE`, `CURL_CA_BUNDLE`,
    /// `REQUESTS_CA_BUNDLE`) or else the system's. Empty: none was found, and HTTPS to any other
    /// server fails certificate checks in the child (the commands warn).
    public let sources: [String]
    let identity: any TLSServerIdentity

    /// Where Debian, Fedora, openSUSE, Alpine and macOS keep the system CA bundle.
    static let systemBundles = [
        "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
    ]

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Makes the CA and the certificate (with `tls`) and writes the files; `environment` is the one
    /// the client would otherwise get (its CA variables are kept in the bundles).
    public init(host: String, environment: [String: String], tls: any TLSProvider) throws {
        self.identity = try tls.makeServerIdentity(
            authority: "netcond origin CA (this run only)", names: [host, "*." + OriginHost.domain])

        self.directory = try TemporaryFiles.makeDirectory(kind: "tls")
        self.caPath = self.directory + "/ca.pem"
        self.bundlePath = self.directory + "/bundle.pem"
        self.nodePath = self.directory + "/node.pem"
        let readable = { (path: String?) -> String? in
            guard let path, !path.isEmpty, FileManager.default.isReadableFile(atPath: path) else { return nil }
            return path
        }
        var users: [String] = []
        for name in ["SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE"] {
            if let path = readable(environment[name]), !users.contains(path) { users.append(path) }
        }
        self.sources =
            users.isEmpty ? Self.systemBundles.first(where: { readable($0) != nil }).map { [$0] } ?? [] : users
        do {
            let pem = self.identity.authorityPEM
            let marked = "# netcond origin CA (this run only)\n" + pem
            try pem.write(toFile: self.caPath, atomically: false, encoding: .utf8)
            try Self.concatenate(self.sources, then: marked).write(
                toFile: self.bundlePath, atomically: false, encoding: .utf8)
            let nodeExtra = readable(environment["NODE_EXTRA_CA_CERTS"]).map { [$0] } ?? []
            try Self.concatenate(nodeExtra, then: marked).write(
                toFile: self.nodePath, atomically: false, encoding: .utf8)
        } catch {
            try? FileManager.default.removeItem(atPath: self.directory)
            throw Failure(description: "cannot write the HTTPS origin's CA to \(self.directory): \(error)")
        }
    }

    private static func concatenate(_ files: [String], then last: String) -> String {
        var text = ""
        for file in files {
            guard let contents = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            text += contents
            if !text.hasSuffix("\n") { text += "\n" }
        }
        return text + last
    }

    /// Adds TLS in front of an origin connection.
    func prepare(_ channel: Channel) throws {
        try self.identity.addServerHandler(to: channel)
    }

    /// The variables that make clients trust the origin.
    public var environment: [String: String] {
        [
            "SSL_CERT_FILE": self.bundlePath, "CURL_CA_BUNDLE": self.bundlePath, "REQUESTS_CA_BUNDLE": self.bundlePath,
            "NODE_EXTRA_CA_CERTS": self.nodePath, "NETCOND_CA": self.caPath,
        ]
    }

    /// A warning for the person running netcond, when the child will trust only the run's CA.
    public var warning: String? {
        guard self.sources.isEmpty else { return nil }
        return "netcond: no system CA bundle found (looked in \(Self.systemBundles.joined(separator: ", "))): "
            + "the program trusts only netcond's own CA, so HTTPS to other servers fails; set SSL_CERT_FILE to your bundle"
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}
