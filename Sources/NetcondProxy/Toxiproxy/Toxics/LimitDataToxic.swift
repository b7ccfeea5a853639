import NIOCore
import NetcondCore

/// Toxiproxy's `limit_data`: exactly `limit` bytes pass (a chunk that crosses the limit is cut
/// there), then the stream is closed; what comes after is dropped. The count outlives an update
/// (a new limit below it closes at the next chunk).
///
/// ```
///   limit 10:  "0123456" ▶ "0123456";  "789abcdef" ▶ "789" + close;  "gone" ▶ dropped
/// ```
struct LimitDataToxic: Equatable {
    let limit: Int64
    /// Bytes passed so far.
    private(set) var passed: Int64

    init(limit: Int64, passed: Int64 = 0) {
        self.limit = limit
        self.passed = passed
    }
}

extension LimitDataToxic: ToxicBehaviour {
    mutating func take(_ piece: ToxicPiece, now: NIODeadline, random: inout SeededRandom) -> [ToxicAction] {
        guard case .data(var buffer, let stamp) = piece else { return [.pass(piece)] }
        var actions: [ToxicAction] = []
        let room = max(0, self.limit - self.passed)
        if Int64(buffer.readableBytes) > room {
            actions.append(.drop(bytes: buffer.readableBytes - Int(room)))
            buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(room))!
        }
        if buffer.readableBytes > 0 {
            self.passed += Int64(buffer.readableBytes)
            actions.append(.pass(.data(buffer, stamp: stamp)))
        }
        if self.limit - self.passed <= 0 { actions.append(.cut(.close)) }
        return actions
    }
}
