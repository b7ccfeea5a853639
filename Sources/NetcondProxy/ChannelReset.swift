import NIOCore

#if canImport(Glibc)
import Glibc
#endif

extension Channel {
    /// Closes the connection with a TCP reset (SO_LINGER 0) instead of an orderly FIN, as a
    /// refusing host or a middlebox dropping state would; unsent bytes are discarded.
    func resetConnection() {
        guard let options = self as? SocketOptionProvider else {
            self.close(promise: nil)
            return
        }
        options.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
            self.close(promise: nil)
        }
    }
}
