import NIOCore
import NetcondCore

@testable import NetcondProxy

/// Virtual time for the toxics' own tests: `t(150)` is 150 ms after an arbitrary start.
func t(_ milliseconds: Int64) -> NIODeadline {
    .uptimeNanoseconds(1_000_000_000 + UInt64(milliseconds) * 1_000_000)
}

func data(_ text: String, at milliseconds: Int64) -> ToxicPiece {
    .data(ByteBuffer(string: text), stamp: t(milliseconds))
}

func bytes(_ count: Int, _ fill: Character = "x") -> String {
    String(repeating: fill, count: count)
}
