import Foundation
import NIOHTTP1

/// A representation's validators (RFC 9110 §8.8): its entity tag and its `Last-Modified` date, and
/// the conditional GET they answer (§13.2.2): `If-None-Match` when the request has one (compared
/// weakly, ``EntityTag/ifNoneMatch(_:matches:)``), else `If-Modified-Since`.
///
/// ```
///  GET, If-None-Match: "a"      ETag "a"   ──▶ 304, no body
///  GET, If-Modified-Since: D    modified ≤ D ──▶ 304 (only without If-None-Match)
///  anything else                          ──▶ the full answer
/// ```
struct Validators: Sendable {
    var etag: EntityTag
    /// An IMF-fixdate (`Mon, 01 Jan 2024 00:00:00 GMT`).
    var lastModified: String

    /// `ETag` and `Last-Modified`, for every answer that carries the representation (and its 304).
    var headers: HTTPHeaders {
        ["ETag": self.etag.headerValue, "Last-Modified": self.lastModified]
    }

    /// The client's copy is current: answer 304. A validator that cannot be read never matches, so
    /// a confused client gets the whole answer rather than a wrong 304.
    func notModified(_ request: OriginRequest) -> Bool {
        guard request.method == .GET || request.method == .HEAD else { return false }
        if let ifNoneMatch = request.headers.first(name: "if-none-match") {
            return EntityTag.ifNoneMatch(ifNoneMatch, matches: self.etag)
        }
        // A date later than the origin's clock is no date the client had from it: ignored (RFC 9110
        // §13.1.3), so a client cannot claim any copy is current by writing the far future.
        guard let ifModifiedSince = request.headers.first(name: "if-modified-since"),
            let since = HTTPDate.seconds(ifModifiedSince), let modified = HTTPDate.seconds(self.lastModified),
            since <= Int64(Date().timeIntervalSince1970)
        else { return false }
        return modified <= since
    }
}

/// An HTTP date in the preferred format, IMF-fixdate (RFC 9110 §5.6.7: `Sun, 06 Nov 1994 08:49:37
/// GMT`), as seconds since 1970. The two obsolete formats are not read (a request that sends one
/// gets the whole answer).
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func seconds(_ text: String) -> Int64? {
        let parts = text.trimmingWhitespace.split(separator: " ")
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
            parts[1].count == 2, let day = Int64(parts[1]), (1...31).contains(day),
            let month = Self.months.firstIndex(of: String(parts[2])),
            parts[3].count == 4, let year = Int64(parts[3]), year >= 1970
        else { return nil }
        let clock = parts[4].split(separator: ":")
        guard parts[4].count == 8, clock.count == 3, let hour = Int64(clock[0]), let minute = Int64(clock[1]),
            let second = Int64(clock[2]), hour < 24, minute < 60, second < 61
        else { return nil }
        return (Self.days(year: year, month: Int64(month) + 1, day: day) * 24 + hour) * 3600 + minute * 60 + second
    }

    /// Days from 1970-01-01 to the date (proleptic Gregorian; Howard Hinnant's `days_from_civil`).
    private static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
