import NIOCore
import NetcondCore

/// The TLS library behind netcond's HTTPS servers (the built-in origin's `https://`, the captive
/// portal's wrong certificate), kept behind this protocol so that what serves no HTTPS builds
/// without one: a TLS library is two copies of BoringSSL, most of a cold build. The `netcond`
/// command always has one (`NetcondTLS`'s ``NIOSSLProvider``); NetcondTesting has one only when
/// a test asks (`tls: .nioSSL`, from the `NetcondTLS` product).
public protocol TLSProvider: Sendable {
    /// A certificate authority made for this run, named `authority`, and a server certificate it
    /// signs for `names` (the first is the subject's name).
    func makeServerIdentity(authority: String, names: [String]) throws -> any TLSServerIdentity
}

/// A server certificate, its key and the CA that signed it, ready to serve TLS.
public protocol TLSServerIdentity: Sendable {
    /// The CA's certificate as PEM: what a client is told to trust.
    var authorityPEM: String { get }
    /// Puts the server side of TLS (offering `http/1.1` by ALPN) first in `channel`'s pipeline;
    /// call on its event loop.
    func addServerHandler(to channel: Channel) throws
}

extension Profile {
    /// Why this profile cannot run without a TLS library, or nil: a captive portal that answers
    /// HTTPS with its own certificate (`https: wrong-certificate`) serves TLS.
    public var tlsRefusal: String? {
        guard self.captivePortal?.https == .wrongCertificate else { return nil }
        return "the profile '\(self.name)' has a captive portal that answers HTTPS with the wrong certificate "
            + "(https: wrong-certificate), which needs TLS; this build has none: add the NetcondTLS product "
            + "to the test target and pass tls: .nioSSL (or run it with the netcond command)"
    }

    /// Why the stream engine cannot run this profile in a build with or without a TLS library, or
    /// nil: what only the packet engine emulates, then what needs TLS.
    public func proxyRefusal(hasTLS: Bool) -> String? {
        self.streamEngineRefusal ?? (hasTLS ? nil : self.tlsRefusal)
    }
}
