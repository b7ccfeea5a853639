import Foundation
import Testing

@testable import NetcondCore

/// A trace file read a piece at a time gives what ``LinkTrace/parse`` gives for its text: the
/// same times, the same errors on the same lines, whatever ends its lines.
@Suite struct LinkTraceFileTests {
    static let texts: [String] = [
        "1\n2\n3\n", "1\r\n1\r\n5", "1\r2\r\r3", "0 1 1 2\n\n# a comment, with a comma\n8\n", "1\u{0B}2\u{0C}3\n",
        "1 # one\n\t2\t# two\r\n3", "", "\n\n", "0\n0\n", "1\nx\n", "1\n2\n\r\n1\n", "-1\n", "+4\n",
        "99999999999\n", "1\n2", "1\n 2 3 4x\n", "# only\n", "5\n\u{00e9}\n", "\r\n\r\n7\r\n",
        String(repeating: "1\n", count: 8_334) + "2\n",
        (1...300_000).map { "\($0 / 7)" }.joined(separator: "\n") + "\n",
    ]

    func parsed(_ text: String) -> Result<LinkTrace, LinkTrace.ReadError> {
        do throws(LinkTrace.ReadError) {
            return .success(try LinkTrace.parse(text, source: "t.trace", path: "/p"))
        } catch {
            return .failure(error)
        }
    }

    @Test(arguments: Array(LinkTraceFileTests.texts.indices))
    func aFileReadInPiecesReadsAsItsText(index: Int) throws {
        let text = Self.texts[index]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netcond-trace-\(getpid())-\(index).trace"
        ).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let read: Result<LinkTrace, LinkTrace.ReadError>
        do throws(LinkTrace.ReadError) {
            if let trace = try LinkTrace.readPlain(path: path, source: "t.trace", absolute: "/p") {
                read = .success(trace)
            } else {
                // Not plain: the whole text is parsed, as before.
                #expect(text.contains(",") || text.unicodeScalars.contains { !$0.isASCII })
                return
            }
        } catch {
            read = .failure(error)
        }
        #expect(read == self.parsed(text))
    }

    @Test func aLongTraceIsHeldInFourBytesATime() throws {
        let trace = try LinkTrace.parse("1\n2\n4294967296\n", source: "t")
        #expect(trace.millisecondsText == "1 2 4294967296")
        #expect(trace.periodMilliseconds == 4_294_967_296)
        #expect(LinkTrace(milliseconds: [1, 2, 3], source: "t") == (try LinkTrace.parse("1 2 3", source: "t")))
    }
}
