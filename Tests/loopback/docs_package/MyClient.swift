// The `MyClient` Docs/netcond-testing.md's example tests: a plain getter, and a downloader that
// asks for the rest with Range after a drop (test_docs_swift.py builds it with the example).
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

public struct Client: Sendable {
    public struct Failed: Error {
        public var status: Int
    }

    public func get(_ url: URL) async throws -> Data {
        let (data, response) = try await URLSession(configuration: .ephemeral).data(from: url)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else { throw Failed(status: status) }
        return data
    }
}

public let myClient = Client()

public struct MyDownloader: Sendable {
    public init() {}

    /// Keeps what arrived and asks for the rest (`Range: bytes=N-`) after a drop; at most five
    /// requests.
    public func download(_ url: URL, to path: String) async throws {
        let data = try await RangeDownload().run(url)
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// One download: URLSession's delegate, keeping the bytes across requests.
final class RangeDownload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var received = Data()
    private var status = 0
    private var continuation: CheckedContinuation<Void, Error>?

    func run(_ url: URL) async throws -> Data {
        let session = URLSession(configuration: .ephemeral, delegate: self, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        var lastError: Error = Client.Failed(status: 0)
        for _ in 0..<5 {
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

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        self.lock.withLock {
            self.status = status
            if status == 200 { self.received = Data() }
        }
        completionHandler(status == 200 || status == 206 ? .allow : .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        self.lock.withLock { self.received.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let (continuation, status) = self.lock.withLock { () -> (CheckedContinuation<Void, Error>?, Int) in
            defer { self.continuation = nil }
            return (self.continuation, self.status)
        }
        if let error {
            continuation?.resume(throwing: error)
        } else if status != 200 && status != 206 {
            continuation?.resume(throwing: Client.Failed(status: status))
        } else {
            continuation?.resume()
        }
    }
}
