import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Downloads a file with URLSession and, when the connection drops, asks for the rest with
/// `Range: bytes=N-` (keeping what it has) instead of starting over; at most `attempts` requests.
public final class Downloader: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    private let lock = NSLock()
    private var received = Data()
    private var continuation: CheckedContinuation<Void, Error>?
    private var status = 0
    public private(set) var requests = 0
    private let attempts: Int

    public init(attempts: Int = 5) {
        self.attempts = attempts
    }

    public func download(_ url: URL) async throws -> Data {
        let session = URLSession(configuration: .ephemeral, delegate: self, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        var lastError: Error = Failed(description: "no attempt")
        while self.requests < self.attempts {
            self.requests += 1
            var request = URLRequest(url: url)
            let have = self.lock.withLock { self.received.count }
            if have > 0 { request.setValue("bytes=\(have)-", forHTTPHeaderField: "Range") }
            do {
                try await withCheckedThrowingContinuation { continuation in
                    self.lock.withLock { self.continuation = continuation }
                    session.dataTask(with: request).resume()
                }
                return self.lock.withLock { self.received }
            } catch {
                lastError = error
                try await Task.sleep(nanoseconds: 200_000_000)
            }
        }
        throw lastError
    }

    public func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        self.lock.withLock {
            self.status = status
            // A whole file (200) replaces what we had; a part (206) follows it.
            if status == 200 { self.received = Data() }
        }
        completionHandler(status == 200 || status == 206 ? .allow : .cancel)
    }

    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        self.lock.withLock { self.received.append(data) }
    }

    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let continuation = self.lock.withLock { () -> CheckedContinuation<Void, Error>? in
            defer { self.continuation = nil }
            return self.continuation
        }
        if let error {
            continuation?.resume(throwing: error)
        } else if self.lock.withLock({ self.status }) != 200 && self.lock.withLock({ self.status }) != 206 {
            continuation?.resume(throwing: Failed(description: "HTTP \(self.lock.withLock { self.status })"))
        } else {
            continuation?.resume()
        }
    }
}
