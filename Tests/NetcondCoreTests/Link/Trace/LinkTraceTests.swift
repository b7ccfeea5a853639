import Foundation
import Testing

@testable import NetcondCore

/// Trace-driven links: reading mahimahi's format, and the queue served by a trace's opportunities, in virtual time.
@Suite struct LinkTraceTests {
    func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

    func trace(_ text: String) throws -> LinkTrace {
        try LinkTrace.parse(text, source: "t.trace")
    }

    func readError(_ text: String) -> LinkTrace.ReadError? {
        do {
            _ = try LinkTrace.parse(text, source: "t.trace")
            return nil
        } catch {
            return error
        }
    }

    @Test func readsMahimahisFormatWithItsPeriodAndMeanRate() throws {
        let trace = try self.trace("# a comment\n1\n1\n2\n\n5  # three at 5\n5\n5\n8\n")
        #expect(trace.opportunityCount == 7)
        #expect(trace.periodMilliseconds == 8)
        // 7 × 1,500 bytes every 8 ms: 10.5 Mbit/s.
        #expect(trace.meanRate == Bandwidth(bitsPerSecond: 10_500_000))
    }

    @Test func badFilesSayWhichLineAndWhatIsAllowed() {
        #expect(self.readError("")?.message.contains("no opportunity") == true)
        #expect(self.readError("0\n0\n")?.message.contains("no period") == true)
        let unsorted = self.readError("1\n5\n3\n")
        #expect(unsorted?.line == 3)
        #expect(unsorted?.message.contains("sort -n") == true)
        let negative = self.readError("1\n-4\n")
        #expect(negative?.line == 2)
        #expect(negative?.message.contains("whole number of milliseconds") == true)
        #expect(self.readError("1\n2.5\n")?.line == 2)
        #expect(self.readError("1\nten\n")?.line == 2)
        let absurd = self.readError(String(repeating: "7\n", count: 9_000))
        #expect(absurd?.line == 8_334)
        #expect(absurd?.message.contains("100 Gbit/s") == true)
    }

    @Test func aFileTooLargeIsRefusedBeforeItIsRead() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-big-\(getpid()).trace").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(LinkTrace.maximumFileBytes + 1))
        try handle.close()
        #expect(throws: LinkTrace.ReadError.self) { try TraceFile.read(path: path, source: "big.trace") }
    }

    @Test func opportunitiesRepeatWithThePeriod() throws {
        let trace = try self.trace("1\n1\n2\n5\n8\n")
        let first = trace.first(atOrAfter: .zero)
        #expect(trace.time(of: first) == self.ms(1))
        #expect(trace.time(of: trace.next(after: first)) == self.ms(1))
        // Past the last line: the next cycle, 8 ms later.
        let late = trace.first(atOrAfter: Instant(nanoseconds: 8_000_001))
        #expect(trace.time(of: late) == self.ms(9))
        #expect(trace.time(of: trace.first(atOrAfter: self.ms(3))) == self.ms(5))
        #expect(trace.time(of: trace.first(atOrAfter: self.ms(16))) == self.ms(16))
        let last = trace.first(atOrAfter: self.ms(7))
        #expect(trace.time(of: last) == self.ms(8))
        #expect(trace.time(of: trace.next(after: last)) == self.ms(9))
    }

    @Test func theQueueLeavesAtTheOpportunitiesExactly() throws {
        // Opportunities at 1, 1, 2, 5, 8 ms (then 9, 9, 10, 13, 16 …).
        let trace = try self.trace("1\n1\n2\n5\n8\n")
        var queue = BottleneckQueue(rate: nil, trace: trace, limit: .bytes(ByteCount(bytes: 1 << 20)))
        // Three full packets at 0: the two opportunities at 1 ms, the one at 2 ms.
        let observed1 = queue.admit(bytes: 1_500, at: .zero)
        #expect(observed1 == .departs(self.ms(1)))
        let observed2 = queue.admit(bytes: 1_500, at: .zero)
        #expect(observed2 == .departs(self.ms(1)))
        let observed3 = queue.admit(bytes: 1_500, at: .zero)
        #expect(observed3 == .departs(self.ms(2)))
        // 2,000 bytes need two opportunities: 5 and 8 ms; 500 bytes waiting behind it take the rest of 8.
        let observed4 = queue.admit(bytes: 2_000, at: self.ms(3))
        #expect(observed4 == .departs(self.ms(8)))
        let observed5 = queue.admit(bytes: 500, at: self.ms(4))
        #expect(observed5 == .departs(self.ms(8)))
        let observed6 = queue.admit(bytes: 600, at: self.ms(4))
        #expect(observed6 == .departs(self.ms(9)), "only 500 were left at 8 ms")
        // Arriving after 9 ms, a packet cannot use what 9 ms had left: the next opportunity is also at 9 ms (a second line), then 10.
        let observed7 = queue.admit(bytes: 100, at: Instant(nanoseconds: 9_500_000))
        #expect(observed7 == .departs(self.ms(10)))
        // An idle link loses its opportunities: nothing is banked for later. At 40 ms (5 periods)
        // come the fifth cycle's last line (its 8 ms) and then the sixth's 1, 1 and 2 ms.
        let observed8 = queue.admit(bytes: 1_500, at: self.ms(40))
        #expect(observed8 == .departs(self.ms(40)))
        let observed9 = queue.admit(bytes: 1_500, at: self.ms(40))
        #expect(observed9 == .departs(self.ms(41)))
        let observed10 = queue.admit(bytes: 1_500, at: self.ms(40))
        #expect(observed10 == .departs(self.ms(41)))
        let observed11 = queue.admit(bytes: 1_500, at: self.ms(40))
        #expect(observed11 == .departs(self.ms(42)))
    }

    @Test func aFullQueueDropsAtItsTailUnderATrace() throws {
        let trace = try self.trace("10\n")
        var queue = BottleneckQueue(rate: nil, trace: trace, limit: .packets(2))
        let observed12 = queue.admit(bytes: 1_500, at: .zero)
        #expect(observed12 == .departs(self.ms(10)))
        let observed13 = queue.admit(bytes: 1_500, at: .zero)
        #expect(observed13 == .departs(self.ms(20)))
        let observed14 = queue.admit(bytes: 1_500, at: .zero)
        #expect(observed14 == .full)
        let observed15 = queue.admit(bytes: 1_500, at: self.ms(10))
        #expect(observed15 == .departs(self.ms(30)))
    }

    @Test func aSavedTraceProfileReadsItsFileRelativeToIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-trace-\(getpid())")
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("traces"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "1\n2\n3\n4\n".write(
            to: folder.appendingPathComponent("traces/cell.trace"), atomically: true, encoding: .utf8)
        let profile = folder.appendingPathComponent("cell.yaml").path
        try "down:\n  trace: traces/cell.trace\n  latency: 20ms\nup:\n  bandwidth: 1mbit\n".write(
            toFile: profile, atomically: true, encoding: .utf8)
        let decoded = try ProfileDecoder().decodeFile(atPath: profile)
        #expect(decoded.down.trace?.opportunityCount == 4)
        #expect(decoded.down.bandwidth == nil)
        #expect(decoded.down.pathRate == Bandwidth(bitsPerSecond: 12_000_000))
        #expect(decoded.up.trace == nil)
        #expect(!decoded.down.isPassThrough)

        // Both rate keys in one direction, a missing file, a bad line: each says where.
        try "down:\n  trace: traces/cell.trace\n  bandwidth: 1mbit\n".write(
            toFile: profile, atomically: true, encoding: .utf8)
        #expect(throws: ConfigError.self) { try ProfileDecoder().decodeFile(atPath: profile) }
        try "down:\n  trace: traces/none.trace\n".write(toFile: profile, atomically: true, encoding: .utf8)
        do {
            _ = try ProfileDecoder().decodeFile(atPath: profile)
            Issue.record("a missing trace was accepted")
        } catch {
            #expect(error.line == 2)
            #expect(error.message.contains("no trace file 'traces/none.trace'"))
        }
        // Written out whole, the profile reads back where no file may be read (the control API).
        try "down:\n  trace: traces/cell.trace\n".write(toFile: profile, atomically: true, encoding: .utf8)
        let traced = try ProfileDecoder().decodeFile(atPath: profile)
        let sent = traced.yaml(inlineTraces: true)
        #expect(sent.contains("milliseconds: \"1 2 3 4\""))
        let received = try ProfileDecoder(fileReferences: .refused(reason: "no files")).decode(
            yaml: sent, file: "request")
        #expect(received.down.trace?.millisecondsText == "1 2 3 4")
        #expect(received.down.trace?.periodMilliseconds == 4)
        // Named by its path, it reads back from anywhere else.
        let shown = try ProfileDecoder().decode(yaml: traced.yamlDescription, file: "/elsewhere/shown.yaml")
        #expect(shown.down.trace?.path == traced.down.trace?.path)
        #expect(shown.down.trace?.millisecondsText == "1 2 3 4")

        // Text from elsewhere (the control API) names no file of this host's.
        let remote = ProfileDecoder(fileReferences: .refused(reason: "send a built-in profile's name"))
        do {
            _ = try remote.decode(yaml: "down:\n  trace: /etc/passwd\n", file: "request")
            Issue.record("a trace from the control API was read")
        } catch {
            #expect(error.message.contains("names a file"))
        }
        try "1\n3\n2\n".write(to: folder.appendingPathComponent("traces/bad.trace"), atomically: true, encoding: .utf8)
        try "down:\n  trace: traces/bad.trace\n".write(toFile: profile, atomically: true, encoding: .utf8)
        do {
            _ = try ProfileDecoder().decodeFile(atPath: profile)
            Issue.record("an unsorted trace was accepted")
        } catch {
            #expect(error.file.hasSuffix("traces/bad.trace"))
            #expect(error.line == 3)
        }
    }

    @Test func thePictureShowsEachSecondsRate() throws {
        // Opportunities every 10 ms for 2 s, then every 100 ms until 4 s (the period): 1.2, 1.2, 0.12, 0.12 Mbit/s.
        let times = (1...200).map { Int64($0) * 10 } + (1...20).map { 2_000 + Int64($0) * 100 }
        let trace = LinkTrace(milliseconds: times, source: "t.trace")
        let rates = try #require(TracePicture.ratePerSecond(LinkDirection(trace: trace), seconds: 5))
        // Second 0 has 10…990 ms (99), second 1 has 1,000…1,990 ms (100), seconds 2 and 3 ten each,
        // second 4 the period's end (4,000 ms) and the next cycle's first 99.
        #expect(rates == [99, 100, 10, 10, 100].map { Double($0 * 12_000) })
        #expect(
            TracePicture.lines("down", LinkDirection(trace: trace), seconds: 5) == [
                "# down: rate, 0–5 s (▁ 0 … █ 1.2Mbit): ██▂▂█"
            ])
        #expect(TracePicture.lines("down", LinkDirection(bandwidth: .mbit(1))).isEmpty, "a fixed rate has no picture")
        // A 4 s period is drawn over a minute (the shortest picture); a step series' delay has its line.
        #expect(TracePicture.span(LinkDirection(trace: trace)) == 60)
        let series = try LinkSeries.parse("# repeat: 150s\n0, 8mbit, 20ms, 0%\n90, 1mbit, 80ms, 0%\n", source: "s.csv")
        let lines = TracePicture.lines("up", LinkDirection(series: series))
        #expect(lines.count == 6, "three minutes of 150 s, rate and delay: \(lines)")
        #expect(lines[0] == "# up: rate, 0–60 s (▁ 0 … █ 8Mbit): " + String(repeating: "█", count: 60))
        #expect(lines[1] == "# up: delay, 0–60 s (▁ 0 … █ 80ms): " + String(repeating: "▃", count: 60))
        #expect(lines[4] == "# up: rate, 120–150 s (▁ 0 … █ 8Mbit): " + String(repeating: "▂", count: 30))
    }
}
