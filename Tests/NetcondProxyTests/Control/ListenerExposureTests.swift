import NIOCore
import Testing

@testable import NetcondProxy

/// Issue 15: the control API stays on loopback whatever `--listen` says, and a listener other
/// machines can reach is warned about.
@Suite struct ListenerExposureTests {
    @Test(
        arguments: [
            ("127.0.0.1", 8080, "127.0.0.1", 8081),
            ("127.0.0.2", 8080, "127.0.0.2", 8081),
            ("::1", 8080, "::1", 8081),
            ("localhost", 8080, "localhost", 8081),
            ("0.0.0.0", 8080, "127.0.0.1", 8081),
            ("::", 8080, "127.0.0.1", 8081),
            ("192.168.1.5", 8080, "127.0.0.1", 8081),
            ("devbox.lan", 8080, "127.0.0.1", 8081),
            ("0.0.0.0", 0, "127.0.0.1", 0),
        ] as [(String, Int, String, Int)])
    func theControlAPIDefaultsToLoopback(listenHost: String, listenPort: Int, host: String, port: Int) {
        let control = ListenerExposure.defaultControl(listenHost: listenHost, listenPort: listenPort)
        #expect(control.host == host && control.port == port)
    }

    @Test func whatIsLoopback() {
        for host in ["127.0.0.1", "127.255.0.9", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "LocalHost"] {
            #expect(HostAddress.isLoopback(host), "\(host)")
        }
        let others = ["0.0.0.0", "::", "128.0.0.1", "10.0.0.1", "::2", "::ffff:10.0.0.1", "127.0.0.1.nip.io", "devbox"]
        for host in others + [""] {
            #expect(!HostAddress.isLoopback(host), "\(host)")
        }
    }

    @Test func loopbackListenersAreNotWarnedAbout() {
        let forward = PortForward(listenHost: "127.0.0.1", listenPort: 9000, targetHost: "db", targetPort: 5432)
        let warnings = ListenerExposure.warnings(
            proxy: ("127.0.0.1", 8080), control: ("127.0.0.1", 8081), forwards: [forward]
        )
        #expect(warnings.isEmpty)
        #expect(ListenerExposure.warnings(proxy: nil, control: nil, forwards: []).isEmpty)
    }

    @Test func eachListenerBeyondLoopbackIsWarnedAbout() {
        let forward = PortForward(listenHost: "::", listenPort: 9000, targetHost: "db.local", targetPort: 5432)
        let warnings = ListenerExposure.warnings(
            proxy: ("0.0.0.0", 8080), control: ("192.168.1.5", 9001), forwards: [forward]
        )
        #expect(warnings.count == 3)
        #expect(warnings[0].hasPrefix("netcond: warning: the proxy listens on 0.0.0.0:8080, not only on loopback"))
        #expect(warnings[0].contains("LAN clients") && warnings[0].contains("loopback services"))
        #expect(warnings[0].hasSuffix("to keep it to this machine: --listen 127.0.0.1:8080"))
        #expect(warnings[1].hasPrefix("netcond: warning: the control API listens on 192.168.1.5:9001"))
        #expect(warnings[1].contains("change this run's conditions"))
        #expect(
            warnings[2] == "netcond: warning: the forward on [::]:9000 is not only on loopback: anyone who can "
                + "reach it is relayed to db.local:5432")
    }

    @Test func aClientFromAnotherHostCannotReachTheControlAPIThroughTheProxy() throws {
        let own = [try SocketAddress(ipAddress: "0.0.0.0", port: 8080)]
        let control = [try SocketAddress(ipAddress: "127.0.0.1", port: 8081)]
        for local in ["127.0.0.1", "127.0.0.5", "::1", "::ffff:127.0.0.1"] {
            #expect(
                ProxyServer.listenersRefused(
                    to: try SocketAddress(ipAddress: local, port: 40000), own: own, localOnly: control) == own,
                "\(local)")
        }
        for remote in ["192.168.1.20", "10.0.0.7", "fe80::1", "::ffff:192.168.1.20"] {
            #expect(
                ProxyServer.listenersRefused(
                    to: try SocketAddress(ipAddress: remote, port: 40000), own: own, localOnly: control) == own
                    + control, "\(remote)")
        }
    }
}
