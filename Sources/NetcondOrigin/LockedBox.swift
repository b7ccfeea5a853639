import Foundation

/// A value behind a lock, for the few pieces of state that are shared across event loops and callers (the request
/// log, the server's listener and open connections). Kept tiny on purpose: callers hold the lock only to copy or
/// mutate plain values, never across I/O.
final class LockedBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.value)
    }
}
