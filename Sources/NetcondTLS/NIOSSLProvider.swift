import NIOCore
import NIOSSL
import NetcondProxy

/// TLS from swift-nio-ssl (BoringSSL), with certificates made by swift-certificates: what the
/// `netcond` command serves HTTPS with. A test using NetcondTesting passes it where it wants
/// HTTPS (`.network(.named("portal"), tls: .nioSSL)`).
public struct NIOSSLProvider: TLSProvider {
    public init() {}

    public func makeServerIdentity(authority: String, names: [String]) throws -> any TLSServerIdentity {
        let ca = try ThrowawayCA(name: authority)
        let issued = try ca.issue(for: names)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: issued.chain.map { .certificate($0) }, privateKey: .privateKey(issued.key))
        configuration.applicationProtocols = ["http/1.1"]
        return Identity(authorityPEM: try ca.certificatePEM(), context: try NIOSSLContext(configuration: configuration))
    }

    private struct Identity: TLSServerIdentity {
        let authorityPEM: String
        let context: NIOSSLContext

        func addServerHandler(to channel: Channel) throws {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: self.context))
        }
    }
}

extension TLSProvider where Self == NIOSSLProvider {
    /// swift-nio-ssl's TLS (BoringSSL).
    public static var nioSSL: NIOSSLProvider { NIOSSLProvider() }
}
