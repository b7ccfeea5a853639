import Foundation
import Testing

@testable import NetcondCore

/// Step series (netcond's own trace format): reading, the values at each moment, and the path they drive, in virtual time.
@Suite struct LinkSeriesTests {
    func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

    func readError(_ text: String) -> LinkTrace.ReadError? {
        do {
            _ = try LinkSeries.parse(text, source: "s.csv")
            return nil
        } catch {
            return error
        }
    }

    let stepped = """
        # a train: fast, then a tunnel
        t, rate, delay, loss
        0,   8mbit, 20ms, 0%
        1.5, 1mbit, 80ms, 2%
        2,   2mbit, 40ms, 100%   # the tunnel
        """

    @Test func eachRowHoldsUntilTheNextAndTheLastHoldsForever() throws {
        let series = try LinkSeries.parse(self.stepped, source: "s.csv")
        #expect(series.steps.count == 3)
        #expect(series.conditions(at: .zero) == (.mbit(8), .milliseconds(20), Probability(0)))
        #expect(series.conditions(at: self.ms(1_499)).rate == .mbit(8))
        #expect(series.conditions(at: self.ms(1_500)) == (.mbit(1), .milliseconds(80), Probability(0.02)))
        #expect(series.conditions(at: self.ms(60_000)).loss == Probability(1))
    }

    @Test func repeatStartsItOverAndLinearMovesBetweenRows() throws {
        let series = try LinkSeries.parse(
            "# repeat: 4s\n# interpolate: linear\n0, 8mbit, 20ms, 0%\n2, 4mbit, 60ms, 10%\n", source: "s.csv")
        #expect(series.period == .seconds(4))
        #expect(series.conditions(at: self.ms(1_000)) == (.mbit(6), .milliseconds(40), Probability(0.05)))
        // From the last row back to the first over the rest of the period.
        #expect(series.conditions(at: self.ms(3_000)) == (.mbit(6), .milliseconds(40), Probability(0.05)))
        #expect(series.conditions(at: self.ms(4_000)) == series.conditions(at: .zero))
        #expect(series.conditions(at: self.ms(9_000)) == series.conditions(at: self.ms(1_000)))
        // Stepped, the mean is time-weighted: 8 mbit for 2 s, 4 mbit for 2 s.
        let stepped = try LinkSeries.parse("# repeat: 4s\n0, 8mbit, 20ms, 0%\n2, 4mbit, 60ms, 10%\n", source: "s.csv")
        #expect(stepped.meanRate == .mbit(6))
    }

    @Test func badRowsSayWhichLineAndWhatIsAllowed() {
        #expect(self.readError("")?.message.contains("no row") == true)
        #expect(self.readError("1, 1mbit, 10ms, 0%\n")?.message.contains("starts at t = 0") == true)
        let backwards = self.readError("0, 1mbit, 10ms, 0%\n2, 1mbit, 10ms, 0%\n1, 1mbit, 10ms, 0%\n")
        #expect(backwards?.line == 3)
        #expect(backwards?.message.contains("rows go forward in time") == true)
        let zero = self.readError("0, 0bit, 10ms, 0%\n")
        #expect(zero?.line == 1)
        #expect(self.readError("0, 1mbit, 10ms\n")?.message.contains("3 fields") == true)
        #expect(self.readError("0, 1MB, 10ms, 0%\n")?.message.contains("rate '1MB'") == true)
        #expect(self.readError("0, 1mbit, 10ms, 150%\n")?.line == 1)
        #expect(self.readError("0, 1mbit, ten, 0%\n")?.message.contains("delay 'ten'") == true)
        #expect(
            self.readError("# repeat: 1s\n0, 1mbit, 10ms, 0%\n2, 1mbit, 10ms, 0%\n")?.message.contains(
                "not after the last row") == true)
        #expect(self.readError("# interpolate: cubic\n0, 1mbit, 10ms, 0%\n")?.line == 1)
    }

    @Test func theInlineFormReadsBackTheSameSeries() throws {
        let series = try LinkSeries.parse(
            "# repeat: 4s\n# interpolate: linear\n0, 8mbit, 20ms, 0.5%\n2, 4mbit, 60ms, 10%\n", source: "s.csv")
        let back = try LinkSeries.parse(
            series.inlineText, source: "s.csv", period: series.period, interpolates: series.interpolates)
        #expect(back == series)
    }

    @Test func thePathTakesEachMomentsRateDelayAndLoss() throws {
        // 12 kbit/s: 1,500 bytes take 1 s on the wire; then 120 kbit/s (0.1 s), with 100 ms more delay; then an outage.
        let series = try LinkSeries.parse(
            "0, 12kbit, 10ms, 0%\n2, 120kbit, 110ms, 0%\n4, 120kbit, 110ms, 100%\n", source: "s.csv")
        var path = LinkPath<Int, Int>(LinkDirection(queue: ByteCount(bytes: 1 << 20), series: series), seed: 1)
        let observed1 = path.offer(1, bytes: 1_500, connection: nil, at: .zero)
        #expect(observed1 == .delivers(at: self.ms(1_010), corruptByte: nil, duplicated: false))
        // Queued behind it, it reaches the head at 1 s and is served at the rate then (12 kbit/s);
        // it leaves at 2 s, when the delay is the next row's 110 ms.
        let observed2 = path.offer(2, bytes: 1_500, connection: nil, at: .zero)
        #expect(observed2 == .delivers(at: self.ms(2_110), corruptByte: nil, duplicated: false))
        // At 2.5 s the rate is ten times higher and the delay 110 ms.
        let observed3 = path.offer(3, bytes: 1_500, connection: nil, at: self.ms(2_500))
        #expect(observed3 == .delivers(at: self.ms(2_710), corruptByte: nil, duplicated: false))
        // In the outage everything is lost.
        for index in 0..<20 {
            let observed4 = path.offer(4 + index, bytes: 100, connection: nil, at: self.ms(4_000 + Int64(index)))
            #expect(observed4 == .dropped(.lost))
        }
    }

    @Test func aPacketOnTheWireWhenTheRateChangesGoesOnAtTheNewRate() throws {
        // 12 kbit/s until 2 s, then 120 kbit/s: 12,000 bits from 1.5 s are 6,000 by 2 s and 6,000 in 50 ms more.
        let series = try LinkSeries.parse("0, 12kbit, 0ms, 0%\n2, 120kbit, 0ms, 0%\n", source: "s.csv")
        #expect(series.departure(bytes: 1_500, startingAt: self.ms(1_500)) == self.ms(2_050))
        #expect(series.departure(bytes: 1_500, startingAt: self.ms(3_000)) == self.ms(3_100))
        // A row of a few bits per second between fast ones holds a packet only while it lasts.
        let dip = try LinkSeries.parse(
            "# repeat: 210ms\n0, 12mbit, 0ms, 0%\n0.07, 100bit, 0ms, 0%\n0.14, 12mbit, 0ms, 0%\n", source: "s.csv")
        let leaves = dip.departure(bytes: 1_500, startingAt: Instant(nanoseconds: 69_500_000))
        #expect(leaves > self.ms(140) && leaves <= self.ms(141))
        // Interpolated, the rate rises along the way: sooner than at the starting rate, later than at the next.
        let ramp = try LinkSeries.parse(
            "# interpolate: linear\n0, 12kbit, 0ms, 0%\n1, 120kbit, 0ms, 0%\n", source: "s.csv")
        let ramped = ramp.departure(bytes: 1_500, startingAt: .zero)
        #expect(ramped < self.ms(1_000) && ramped > self.ms(100))
    }

    @Test func aProfileNamesASeriesByTheSameKeyAndNothingElseSetsItsDelayOrLoss() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("netcond-series-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try self.stepped.write(to: folder.appendingPathComponent("train.csv"), atomically: true, encoding: .utf8)
        let profile = folder.appendingPathComponent("train.yaml").path
        try "extends: 3g\ndown:\n  trace: train.csv\n".write(toFile: profile, atomically: true, encoding: .utf8)
        let decoded = try ProfileDecoder().decodeFile(atPath: profile)
        #expect(decoded.down.series?.steps.count == 3)
        #expect(decoded.down.bandwidth == nil && decoded.down.trace == nil)
        #expect(decoded.down.latency == .milliseconds(20), "the first row's delay stands for the direction's")
        #expect(decoded.down.loss == .none)
        // profiles show reads back; ctl's inline form reads back where no file may be read.
        let shown = try ProfileDecoder().decode(yaml: decoded.yamlDescription, file: "/elsewhere/x.yaml")
        #expect(shown.down.series?.steps == decoded.down.series?.steps)
        let sent = try ProfileDecoder(fileReferences: .refused(reason: "no files")).decode(
            yaml: decoded.yaml(inlineTraces: true), file: "request")
        #expect(sent.down.series?.steps == decoded.down.series?.steps)

        try "down:\n  trace: train.csv\n  latency: 10ms\n".write(toFile: profile, atomically: true, encoding: .utf8)
        do {
            _ = try ProfileDecoder().decodeFile(atPath: profile)
            Issue.record("latency beside a series was accepted")
        } catch {
            #expect(error.line == 3)
            #expect(error.message.contains("sets the delay and the loss"))
        }
    }

    /// Every shipped measured profile reads. Akamai's series move their rate and delay every 70 ms
    /// and repeat every 14 s; Starlink's change at seconds 12, 27, 42 and 57 of each minute, with
    /// outages (100 % loss) at some boundaries, over 4 minutes; Pantheon's are fixed fits.
    @Test func theShippedMeasuredProfilesRead() throws {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let directory = root.appendingPathComponent("Profiles/measured")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".yaml") }
            .sorted()
        #expect(files.filter { $0.hasPrefix("akamai-") }.count == 9)
        #expect(files.filter { $0.hasPrefix("pantheon-") }.count == 5)
        #expect(files.contains("starlink.yaml"))
        for file in files {
            let profile = try ProfileDecoder().decodeFile(atPath: directory.appendingPathComponent(file).path)
            #expect(profile.source.count > 40, "\(file) says where it comes from")
            if file.hasPrefix("akamai-") {
                let series = try #require(profile.down.series, "\(file) has no series")
                #expect(profile.up.series == series)
                #expect(series.period == .seconds(14))
                #expect(Set(series.steps.map(\.rate)).count > 10, "\(file): the rate moves")
                #expect(Set(series.steps.map(\.delay)).count > 10, "\(file): the delay moves")
                #expect(profile.source.contains("Apache-2.0"))
            } else if file.hasPrefix("pantheon-") {
                #expect(profile.down.bandwidth != nil && profile.down.bandwidth == profile.up.bandwidth, "\(file)")
                #expect(profile.down.queuePackets != nil, "\(file): Pantheon's queue counts packets")
                #expect(profile.down.latency == profile.up.latency)
            } else {
                let down = try #require(profile.down.series, "\(file) has no series")
                let up = try #require(profile.up.series)
                #expect(down.period == .seconds(240) && up.period == .seconds(240))
                // Each slot's round trip changes only at the boundaries (and by 1.5 ms a second
                // within one); some boundaries are outages.
                let boundaries = [12, 27, 42, 57].flatMap { second in (0..<4).map { Int64($0 * 60 + second) } }
                for step in down.steps where step.loss == .one {
                    #expect(boundaries.contains(step.at.nanoseconds / 1_000_000_000), "an outage at \(step.at)")
                }
                #expect(down.steps.contains { $0.loss == .one })
                #expect(down.steps.allSatisfy { $0.delay <= .milliseconds(33) }, "p99 of the round trip under 65 ms")
                #expect(down.meanRate > up.meanRate)
            }
        }
    }

    /// A time too big for nanoseconds is refused with its range, never converted (1e10 s trapped).
    @Test func aTimePastTheWeekIsRefusedBeforeItIsConverted() {
        for t in ["1e10", "1e308", "9.3e9", "604800.5", "inf", "nan", "-1"] {
            let error = self.readError("0, 1mbit, 20ms, 0%\n\(t), 2mbit, 20ms, 0%\n")
            #expect(error?.line == 2, "\(t): \(String(describing: error))")
            #expect(error?.message.contains("allowed") == true, "\(t): \(String(describing: error))")
        }
        #expect(self.readError("0, 1mbit, 20ms, 0%\n604800, 2mbit, 20ms, 0%\n") == nil)
    }

    /// CRLF (and a lone CR) end lines as LF does; an error quotes one line, never the file.
    @Test func crlfLinesReadAsLinesAndAnErrorQuotesOneLine() throws {
        let crlf = try LinkSeries.parse(
            "t, rate, delay, loss\r\n0, 8mbit, 20ms, 0%\r\n1.5, 1mbit, 80ms, 2%\r\n", source: "s.csv")
        let lf = try LinkSeries.parse(
            "t, rate, delay, loss\n0, 8mbit, 20ms, 0%\n1.5, 1mbit, 80ms, 2%\n", source: "s.csv")
        #expect(crlf.steps == lf.steps)
        #expect(try LinkSeries.parse("0, 8mbit, 20ms, 0%\r1.5, 1mbit, 80ms, 2%\r", source: "s.csv").steps == lf.steps)
        let trace = try LinkTrace.parse("1\r\n1\r\n2\r\n5\r\n", source: "t")
        #expect(trace == (try LinkTrace.parse("1\n1\n2\n5\n", source: "t")))
        let long = String(repeating: "x", count: 100_000)
        let error = self.readError(
            "0, 1mbit, 20ms, 0%\r\n1, \(long), 20ms, 0%\r\n" + String(repeating: "2, 1mbit, 1ms, 0%\r\n", count: 1_000))
        #expect(error?.line == 2)
        #expect((error?.message.count ?? .max) < 1_000, "\(error?.message.count ?? -1) characters")
        #expect(error?.message.contains(String(repeating: "x", count: 201)) == false)
        let traceError = try? LinkTrace.parse("1\r\n" + long + "\r\n", source: "t")
        #expect(traceError == nil)
        do {
            _ = try LinkTrace.parse("1\r\n" + long + "\r\n", source: "t")
        } catch {
            #expect(error.line == 2 && error.message.count < 500, "\(error.line) \(error.message.count)")
        }
    }

    /// The row limit is checked before the rows are read (a file past it was refused after reading them all).
    @Test func theRowLimitIsCheckedBeforeTheRowsAreRead() {
        let rows =
            "t, rate, delay, loss\n" + String(repeating: "1, 1mbit, 1ms, 0%\n", count: LinkSeries.maximumRows + 1)
        let error = self.readError(rows)
        #expect(
            error?.line == 0 && error?.message.contains("more than 1000000 rows") == true,
            "\(String(describing: error))")
        #expect(
            LinkSeries.rowCount(
                "t,r\n# a, comment\n0, 1mbit, 1ms, 0%; 1, 2mbit, 1ms, 0% # x, y\r\n\n", stoppingAfter: 10) == 3)
    }
}
