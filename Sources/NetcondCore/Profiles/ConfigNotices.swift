import Foundation

/// What a file says that still reads but is written an older way (`truncate_after: 10KB` for
/// `cut_after: 10KB`): one note per place, with the new spelling. Decoding never fails on one;
/// `netcond validate`, `run` and `test` print them under the file.
public struct ConfigNotice: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public var description: String { "\(self.file):\(self.line):\(self.column): note: \(self.message)" }
}

/// Collects the notices of the decoding that runs inside ``collecting(_:)``; outside one, notices
/// are dropped (a test decoding a profile, a live `POST /faults`).
public final class ConfigNotices: Sendable {
    @TaskLocal static var current: ConfigNotices?

    private let lock = NSLock()
    nonisolated(unsafe) private var notices: [ConfigNotice] = []

    /// Runs `body`, collecting what it decodes; returns its result and the notices, in file order.
    public static func collecting<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> (T, [ConfigNotice]) {
        let collector = ConfigNotices()
        let result: Result<T, E> = Self.$current.withValue(collector) {
            do throws(E) { return .success(try body()) } catch { return .failure(error) }
        }
        let notices = collector.lock.withLock { collector.notices }
        return (try result.get(), Self.ordered(notices))
    }

    /// Notes that `node` uses an older spelling.
    static func note(_ node: ConfigNode, _ message: String) {
        guard let collector = Self.current else { return }
        let notice = ConfigNotice(file: node.file, line: node.line, column: node.column, message: message)
        collector.lock.withLock {
            if !collector.notices.contains(notice) { collector.notices.append(notice) }
        }
    }

    /// Each file's notices together, files in the order first noted, each in line order.
    private static func ordered(_ notices: [ConfigNotice]) -> [ConfigNotice] {
        var files: [String: Int] = [:]
        for notice in notices where files[notice.file] == nil { files[notice.file] = files.count }
        return notices.enumerated().sorted { a, b in
            let (x, y) = (a.element, b.element)
            return (files[x.file]!, x.line, x.column, a.offset) < (files[y.file]!, y.line, y.column, b.offset)
        }.map(\.element)
    }
}
