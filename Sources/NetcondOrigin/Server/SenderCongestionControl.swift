import Foundation
import NIOCore

/// The TCP congestion control of the origin's own sockets (Linux `TCP_CONGESTION`), so that under
/// the packet engine the kernel's sender is the one the profile's `tcp:` names — the sender the
/// stream engine models. Set on a listener before any connection arrives, every accepted socket
/// is born with it (set after `accept`, a socket born under BBR would keep BBR's pacing).
public enum SenderCongestionControl {
    /// Linux's `TCP_CA_NAME_MAX`: names are at most 15 bytes and a NUL.
    typealias Name = (
        UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
    )

    static let option = NIOBSDSocket.Option(rawValue: 13)  // TCP_CONGESTION

    /// Gives `listener` the algorithm `name`; fails when the kernel has no such algorithm (or does
    /// not allow it to this process).
    static func set(_ name: String, on listener: Channel) -> EventLoopFuture<Void> {
        guard let provider = listener as? SocketOptionProvider else {
            return listener.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        var bytes = [UInt8](name.utf8.prefix(15))
        bytes += [UInt8](repeating: 0, count: 16 - bytes.count)
        var value: Name = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
        return provider.unsafeSetSocketOption(level: .tcp, name: Self.option, value: value)
    }

    /// The algorithm `listener`'s connections are born with, as the kernel reports it.
    static func get(from listener: Channel) -> EventLoopFuture<String> {
        guard let provider = listener as? SocketOptionProvider else {
            return listener.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        let value: EventLoopFuture<Name> = provider.unsafeGetSocketOption(level: .tcp, name: Self.option)
        return value.map { name in
            withUnsafeBytes(of: name) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
        }
    }

    /// This host's default (`net.ipv4.tcp_congestion_control`), or nil when it cannot be read.
    public static var hostDefault: String? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_congestion_control", encoding: .utf8)
        else { return nil }
        let name = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return name.isEmpty ? nil : name
    }
}
