import Testing

@testable import NetcondCore

/// Every accepted unit form, and every rejection with the substance of its message.
@Suite struct UnitParsingTests {
    // MARK: - Durations

    @Test(arguments: [
        ("0", Int64(0)),
        ("0ms", 0),
        ("400ms", 400_000_000),
        ("2s", 2_000_000_000),
        ("1.5s", 1_500_000_000),
        ("250us", 250_000),
        ("250µs", 250_000),
        ("7ns", 7),
        ("1m", 60_000_000_000),
        ("1h", 3_600_000_000_000),
        (" 400 ms ", 400_000_000),
        ("0.1s", 100_000_000),
    ])
    func durations(text: String, nanoseconds: Int64) throws {
        #expect(try Span.parse(text) == Span(nanoseconds: nanoseconds))
    }

    @Test(arguments: [
        ("400", "'400' has no unit"),
        ("1.5", "has no unit"),
        ("-5ms", "is negative"),
        ("5sec", "did you mean s?"),
        ("5 minutes", "did you mean m? allowed"),
        ("5 m s", "not a single value"),
        ("5minutes", "did you mean m?"),
        ("5M", "did you mean ms (milliseconds) or m (minutes)?"),
        ("5d", "unknown unit 'd'"),
        ("ms", "does not start with a number"),
        ("", "empty"),
        ("1e3ms", "unknown unit 'e3ms'"),
        (".5s", "does not start with a number"),
        ("99999999999999h", "too large"),
    ])
    func durationRejections(text: String, problem: String) {
        #expect {
            try Span.parse(text)
        } throws: { error in
            let error = error as? UnitParseError
            return error?.quantity == .duration && error?.message.contains(problem) == true
                && error?.message.contains("allowed: a number with a unit ns, us, ms, s, m (minutes) or h") == true
                && error?.message.contains("e.g. 400ms") == true
        }
    }

    // MARK: - Byte sizes

    @Test(arguments: [
        ("1500B", Int64(1500)),
        ("64KB", 65_536),
        ("64kB", 65_536),
        ("64KiB", 65_536),
        ("1.5MB", 1_572_864),
        ("1MiB", 1_048_576),
        ("1GB", 1_073_741_824),
        ("1GiB", 1_073_741_824),
        ("0B", 0),
    ])
    func byteSizes(text: String, bytes: Int64) throws {
        #expect(try ByteCount.parse(text) == ByteCount(bytes: bytes))
    }

    @Test(arguments: [
        ("64kb", "'kb' is ambiguous; did you mean KB (bytes) or kbit (bits)?"),
        ("64Kb", "'Kb' is ambiguous; did you mean KB (bytes) or kbit (bits)?"),
        ("1Mb", "did you mean MB (bytes) or Mbit (bits)?"),
        ("1500b", "did you mean B (bytes)?"),
        ("1500", "'1500' has no unit"),
        ("0", "has no unit"),
        ("64kbit", "is a rate in bits; this is a size in bytes"),
        ("64TB", "unknown unit 'TB'"),
        ("-1KB", "is negative"),
    ])
    func byteSizeRejections(text: String, problem: String) {
        #expect {
            try ByteCount.parse(text)
        } throws: { error in
            let error = error as? UnitParseError
            return error?.quantity == .byteCount && error?.message.contains(problem) == true
                && error?.message.contains("(e.g. 1500B, 64KB, 1.5MB)") == true
        }
    }

    // MARK: - Bandwidth

    @Test(arguments: [
        ("240kbit", Int64(240_000)),
        ("1.5Mbit", 1_500_000),
        ("1Gbit", 1_000_000_000),
        ("64kbps", 64_000),
        ("2Mbps", 2_000_000),
        ("100bit", 100),
        ("10Mbit/s", 10_000_000),
        ("0", 0),
        ("0kbit", 0),
    ])
    func bandwidths(text: String, bitsPerSecond: Int64) throws {
        #expect(try Bandwidth.parse(text) == Bandwidth(bitsPerSecond: bitsPerSecond))
    }

    @Test func unlimitedIsNoLimit() throws {
        #expect(try Bandwidth.parseLimit("unlimited") == nil)
        #expect(try Bandwidth.parseLimit("Unlimited") == nil)
        #expect(try Bandwidth.parseLimit("240kbit") == .kbit(240))
        #expect {
            try Bandwidth.parse("unlimited")
        } throws: { error in
            (error as? UnitParseError)?.message.contains("does not start with a number") == true
        }
        #expect {
            try Bandwidth.parseLimit("fast")
        } throws: { error in
            (error as? UnitParseError)?.message.contains("allowed: unlimited, or a number with a unit bit") == true
        }
    }

    @Test(arguments: [
        ("1MB/s", "'MB/s' is a rate in bytes; bandwidth is written in bits: use 8Mbit for 1MB/s"),
        ("2MBps", "use 16Mbit for 2MBps"),
        ("500KB/s", "use 4Mbit for 500KB/s"),
        ("1MB", "use 8Mbit"),
        ("1Mb", "'Mb' is ambiguous; did you mean Mbit (bits per second)?"),
        ("64kb", "did you mean kbit"),
        ("240", "'240' has no unit"),
        ("240k", "unknown unit 'k'"),
        ("-1Mbit", "is negative"),
        ("0.1bit", "less than 1 bit per second"),
    ])
    func bandwidthRejections(text: String, problem: String) {
        #expect {
            try Bandwidth.parse(text)
        } throws: { error in
            let error = error as? UnitParseError
            return error?.quantity == .bandwidth && error?.message.contains(problem) == true
                && error?.message.contains("e.g. 240kbit, 1.5Mbit") == true
        }
    }

    // MARK: - Probability

    @Test(arguments: [
        ("1%", 0.01),
        ("0.5%", 0.005),
        ("100%", 1.0),
        ("0%", 0.0),
        ("0.01", 0.01),
        ("0", 0.0),
    ])
    func probabilities(text: String, value: Double) throws {
        #expect(try Probability.parse(text) == Probability(value))
    }

    @Test(arguments: [
        ("150%", "150% is more than 100%"),
        ("-1%", "is negative"),
        ("-0.1", "is negative"),
        ("5", "5 is more than 1 as a fraction; did you mean 5%?"),
        ("1", "'1' is ambiguous: write 100% (always) or 1% (one in a hundred)"),
        ("1pct", "unknown unit 'pct'"),
        ("%", "does not start with a number"),
    ])
    func probabilityRejections(text: String, problem: String) {
        #expect {
            try Probability.parse(text)
        } throws: { error in
            let error = error as? UnitParseError
            return error?.quantity == .probability && error?.message.contains(problem) == true
                && error?.message.hasSuffix(
                    "allowed: a percentage 0%…100% (e.g. 1%) or a fraction 0…1 (e.g. 0.01)"
                ) == true
        }
    }

    // MARK: - Round trip of the human forms

    @Test func descriptionsParseBack() throws {
        for span in [Span.milliseconds(400), .seconds(Int64(2)), .microseconds(250), .milliseconds(1500), .zero] {
            #expect(try Span.parse(span.description) == span)
        }
        for bytes: Int64 in [1500, 65_536, 1_572_864, 1 << 30, 262_144] {
            #expect(try ByteCount.parse(ByteCount(bytes: bytes).description) == ByteCount(bytes: bytes))
        }
        for rate: Int64 in [240_000, 1_500_000, 1_000_000_000, 100] {
            let bandwidth = Bandwidth(bitsPerSecond: rate)
            #expect(try Bandwidth.parse(bandwidth.description) == bandwidth)
        }
        for value in [0.01, 0.005, 1.0, 0.1] {
            #expect(try Probability.parse(Probability(value).description) == Probability(value))
        }
    }
}
