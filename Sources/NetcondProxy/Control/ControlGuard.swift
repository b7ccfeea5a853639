import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// Who may change the conditions of a scenario while it runs: not the client under test.
///
/// A scenario's verdict judges the client under the scenario's conditions; a client that could
/// switch them to `none` through the control API (its URL is in `NETCOND_CONTROL`) would judge
/// itself. So during a scenario every change (`POST`, `DELETE`) must carry the run's token, a
/// random value netcond keeps and never puts in the client's environment or on any page the API
/// serves; reading (`/status`, `/events`, the dashboard) stays open. A change made with the token
/// (a person at the terminal, `netcond ctl --token`) is done, and kept: the verdict says so.
///
/// ```
///   client:   POST /profile {"name":"none"}                       → 403, nothing changes
///   terminal: POST /outage  Authorization: Bearer <token>         → 200, and under the verdict:
///             ⚠ changed from outside the scenario: at +3.2s POST /outage
/// ```
/// `netcond run PROFILE` and `netcond proxy` have no guard: their live control is the point.
public final class ControlGuard: Sendable {
    public let token: String
    private let changes = NIOLockedValueBox<[(at: NIODeadline, what: String)]>([])

    /// Told the API's URL once it listens (to show a person the token and where to use it).
    let onListening: (@Sendable (_ url: String, _ token: String) -> Void)?

    public init(
        token: String = ControlGuard.randomToken(),
        onListening: (@Sendable (_ url: String, _ token: String) -> Void)? = nil
    ) {
        self.token = token
        self.onListening = onListening
    }

    /// 128 random bits, in hex.
    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in String(generator.next() as UInt64, radix: 16).leftPadded(to: 16) }.joined()
    }

    /// Nil when `headers` carry the token; else why the change is refused (403).
    func check(headers: [(name: String, value: String)]) -> ControlAPI.Rejection? {
        let given = headers.first { $0.name.lowercased() == "authorization" }?.value.trimmingCharacters(
            in: .whitespaces)
        if let given, given.lowercased().hasPrefix("bearer "),
            Self.same(String(given.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces), self.token)
        {
            return nil
        }
        return ControlAPI.Rejection(
            status: 403,
            message:
                "this run is a scenario: its conditions are the scenario's, and the client under test may not change "
                + "them (its verdict would be its own); reading (/status, /events) is allowed; a change from outside "
                + "needs the run's token (netcond ctl --token, as netcond printed it), and the verdict then says so"
        )
    }

    /// A change made with the token, `what` (`POST /outage`), now.
    func record(_ what: String) {
        self.changes.withLockedValue { $0.append((.now(), what)) }
    }

    /// The changes made with the token, in seconds since `start` (a change before it counts as 0), in order.
    public func changes(since start: NIODeadline) -> [(at: Double, what: String)] {
        self.changes.withLockedValue { changes in
            changes.map { (max(0, Double(($0.at - start).nanoseconds) / 1e9), $0.what) }
        }
    }

    /// Compares in time that does not depend on where the texts differ.
    private static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        self.count >= length ? self : String(repeating: "0", count: length - self.count) + self
    }
}
