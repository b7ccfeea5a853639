import Foundation

/// Who can reach netcond's listeners: the control API's default address (always loopback) and the
/// warning for each listener other machines can reach.
///
/// ```
///   --listen 127.0.0.1:8080                        control on 127.0.0.1:8081; no warning
///   --listen [::1]:8080                            control on ::1 port 8081; no warning
///   --listen 0.0.0.0:8080                          control on 127.0.0.1:8081; a warning for the proxy
///   --listen 0.0.0.0:8080 --control 0.0.0.0:9000   a warning for each
/// ```
///
/// None of them has authentication. The proxy relays to any host and port it is asked for,
/// 127.0.0.1 included, so a client that reaches it reaches every service of this machine that
/// listens on loopback only; the control API changes the conditions and tells the run's traffic.
public enum ListenerExposure {
    /// The control API's address when `--control` is not given: the proxy's port + 1 (0 stays 0,
    /// any free port) on the proxy's host if that is loopback, else on 127.0.0.1.
    public static func defaultControl(listenHost: String, listenPort: Int) -> (host: String, port: Int) {
        (HostAddress.isLoopback(listenHost) ? listenHost : "127.0.0.1", listenPort == 0 ? 0 : listenPort + 1)
    }

    /// One line (for stderr) per listener on an address other than loopback.
    public static func warnings(
        proxy: (host: String, port: Int)?,
        control: (host: String, port: Int)?,
        forwards: [PortForward]
    ) -> [String] {
        var lines: [String] = []
        if let proxy, !HostAddress.isLoopback(proxy.host) {
            let address = Self.display(proxy.host, proxy.port)
            lines.append(
                "netcond: warning: the proxy listens on \(address), not only on loopback: LAN clients (anyone who "
                    + "can reach this machine on that port) can use it with no authentication, and through it reach "
                    + "this machine's loopback services (anything listening on 127.0.0.1 only, netcond's control API "
                    + "included); to keep it to this machine: --listen 127.0.0.1:\(proxy.port)"
            )
        }
        if let control, !HostAddress.isLoopback(control.host) {
            let address = Self.display(control.host, control.port)
            lines.append(
                "netcond: warning: the control API listens on \(address), not only on loopback: anyone who can "
                    + "reach it can change this run's conditions and read its status and event log (it has no "
                    + "authentication); without --control it stays on 127.0.0.1"
            )
        }
        for forward in forwards where !HostAddress.isLoopback(forward.listenHost) {
            let address = Self.display(forward.listenHost, forward.listenPort)
            let target = Self.display(forward.targetHost, forward.targetPort)
            lines.append(
                "netcond: warning: the forward on \(address) is not only on loopback: anyone who can reach it "
                    + "is relayed to \(target)"
            )
        }
        return lines
    }

    /// `0.0.0.0:8080`, `[::]:8080`.
    public static func display(_ host: String, _ port: Int) -> String {
        let host = HostAddress.unbracketed(host)
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
