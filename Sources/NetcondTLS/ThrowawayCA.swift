import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A certificate authority made for one run and forgotten with it: it signs the certificates
/// netcond presents (the captive portal's certificate for the wrong name, the origin's HTTPS).
/// Nothing is written to disk unless a caller asks for the CA's PEM.
final class ThrowawayCA: Sendable {
    let name: String
    private let key: P256.Signing.PrivateKey
    let certificate: Certificate

    init(name: String = "netcond throwaway CA") throws {
        self.name = name
        self.key = P256.Signing.PrivateKey()
        let subject = try DistinguishedName {
            OrganizationName("netcond")
            CommonName(name)
        }
        let now = Date()
        self.certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(self.key.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 7 * 86_400,
            issuer: subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(self.key)
        )
    }

    /// The CA certificate as PEM (what a client would be told to trust).
    func certificatePEM() throws -> String {
        try self.certificate.serializeAsPEM().pemString
    }

    /// A server certificate for `names`, signed by this CA, and its key, ready for NIOSSL.
    func issue(for names: [String]) throws -> (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
        let key = P256.Signing.PrivateKey()
        let now = Date()
        let leaf = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 7 * 86_400,
            issuer: self.certificate.subject,
            subject: try DistinguishedName { CommonName(names.first ?? "localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names.map { .dnsName($0) })
            },
            issuerPrivateKey: .init(self.key)
        )
        let chain = [
            try NIOSSLCertificate(bytes: Array(try leaf.serializeAsPEM().pemString.utf8), format: .pem),
            try NIOSSLCertificate(bytes: Array(try self.certificatePEM().utf8), format: .pem),
        ]
        let privateKey = try NIOSSLPrivateKey(bytes: Array(key.pemRepresentation.utf8), format: .pem)
        return (chain, privateKey)
    }
}
