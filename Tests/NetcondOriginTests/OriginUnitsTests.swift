import NetcondCore
import Testing

@testable import NetcondOrigin

@Suite("OriginUnits")
struct OriginUnitsTests {
    static let maximum: Int64 = 4 << 30

    @Test(
        "sizes in human units",
        arguments: [
            ("1500", 1500), ("1500B", 1500), ("0", 0), ("200KB", 204_800), ("200kb", 204_800), ("200k", 204_800),
            ("200K", 204_800), ("64KiB", 65_536), ("1MB", 1_048_576), ("1m", 1_048_576), ("1.5MB", 1_572_864),
            ("4GB", 4 << 30), ("1g", 1 << 30), ("1.5KB", 1536),
        ] as [(String, Int64)]
    )
    func sizes(text: String, bytes: Int64) throws {
        #expect(try OriginUnits.parseSize(Substring(text), maximum: Self.maximum) == bytes)
    }

    @Test(
        "malformed or too large sizes are rejected with a reason",
        arguments: [
            ("", "expected a number"), ("KB", "expected a number"), ("12XB", "unknown unit 'XB'"),
            ("-5", "unknown unit"), ("1..5KB", "expected a number"), ("1.KB", "expected a number"),
            ("0.1KB", "not a whole number"), ("4097MB", "larger than the maximum 4GB"),
            ("99999999999999999999", "expected a number"), ("5GB", "larger than the maximum"),
            ("99999999999GB", "larger than the maximum"),
        ]
    )
    func badSizes(text: String, reason: String) {
        #expect {
            try OriginUnits.parseSize(Substring(text), maximum: Self.maximum)
        } throws: { error in
            guard let error = error as? OriginInputError else { return false }
            return error.reason.contains(reason) && error.reason.contains("'\(text)'")
        }
    }

    @Test(
        "durations",
        arguments: [
            ("500ms", 500_000_000), ("2s", 2_000_000_000), ("1.5s", 1_500_000_000), ("2", 2_000_000_000),
            ("0", 0), ("0.25ms", 250_000), ("60s", 60_000_000_000), ("1500MS", 1_500_000_000),
        ] as [(String, Int64)]
    )
    func durations(text: String, nanoseconds: Int64) throws {
        #expect(try OriginUnits.parseDuration(Substring(text), maximum: .seconds(Int64(60))).nanoseconds == nanoseconds)
    }

    @Test("bad durations", arguments: ["61s", "60001ms", "abc", "5min", "-1s", "1.0000000001s", ""])
    func badDurations(text: String) {
        #expect(throws: OriginInputError.self) {
            try OriginUnits.parseDuration(Substring(text), maximum: .seconds(Int64(60)))
        }
    }
}
