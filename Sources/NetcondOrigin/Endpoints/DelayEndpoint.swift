import NIOHTTP1
import NetcondCore

/// `GET /delay/{duration}` — waits (`500ms`, `2s`, `1.5s`; at most the configured maximum) and then answers 200 with
/// `{"delay_ms": 500}`. The wait is a ``OriginResponse/delay``: the handler schedules it on the channel's event loop
/// and cancels it if the client goes away.
struct DelayEndpoint: OriginEndpoint {
    let maximumDelay: Span

    var name: String { "delay" }
    var methods: [HTTPMethod] { [.GET] }
    var usage: (pattern: String, summary: String) {
        ("/delay/{duration}", "waits (500ms, 2s, 1.5s; max \(self.maximumDelay)), then 200 with JSON")
    }

    func respond(to request: OriginRequest, arguments: ArraySlice<Substring>) -> OriginResponse {
        guard arguments.count == 1, let durationText = arguments.first else {
            return .text(arguments.isEmpty ? .badRequest : .notFound, "usage: /delay/{duration}, e.g. /delay/500ms\n")
        }
        let delay: Span
        do {
            delay = try OriginUnits.parseDuration(durationText, maximum: self.maximumDelay)
        } catch {
            return .text(.badRequest, error.reason + "\n")
        }
        var response = OriginResponse.json(.ok, "{\"delay_ms\": \(Self.milliseconds(delay))}\n")
        response.delay = delay
        return response
    }

    /// Milliseconds as a JSON number: `500`, `1500`, `0.25`.
    static func milliseconds(_ span: Span) -> String {
        let whole = span.nanoseconds / 1_000_000
        var fraction = span.nanoseconds % 1_000_000
        guard fraction != 0 else { return String(whole) }
        var digits = 6
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        let fractionText = String(fraction)
        return "\(whole)." + String(repeating: "0", count: digits - fractionText.count) + fractionText
    }
}
