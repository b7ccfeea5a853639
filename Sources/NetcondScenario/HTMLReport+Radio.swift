import Foundation
import NetcondCore

/// The device's radio under a scenario's timeline (when the profile has `radio:`): one lane on the
/// same time axis, each state a coloured span, and the totals in a line beneath.
///
/// ```
///  radio (lte) ▒▓▓░░░░░░░░░░░            ▒▓░░░░░░░░   promotion ▒ active ▓ tail ░ (idle blank)
///              0s    5s    10s   15s   20s   25s
///  radio (lte): on 21.3 s of 30.4 s (70%), 2 promotions (3.9/min), ≈ 23 J
/// ```
/// Its own SVG (class `timeline`, so the report's script zooms it as it does the timeline above).
extension HTMLReport {
    /// Each state's colour (idle: none drawn).
    static let radioColours: [(RadioState, String)] = [
        (.promotion, "#e8590c"), (.active, "#c92a2a"), (.tail, "#f59f00"), (.secondTail, "#ffd43b"),
    ]

    static func radioLane(_ scenario: ReportScenario, index: Int, end: Double) -> String {
        guard let radio = scenario.radio else { return "" }
        let scale = TimeScale(end: end)
        let top = 8.0, height = 14.0, axis = top + height + 8
        var svg = ""
        for interval in radio.intervals.prefix(Self.maxRadioIntervals) {
            guard let start = Self.finite(interval.start), let stop = Self.finite(interval.end), stop > start,
                let colour = Self.radioColours.first(where: { $0.0.rawValue == interval.state })?.1
            else { continue }
            let x = scale.position(start)
            let width = max(0, scale.position(stop) - x)
            svg +=
                "<g class=\"mark radio-state radio-\(Self.escape(interval.state))\" data-at=\"\(Self.number(start))\">"
                + "<title>+\(Self.number(start))s–\(Self.number(stop))s radio \(Self.escape(interval.state))</title>"
                + "<rect x=\"\(String(format: "%.1f", x))\" y=\"\(Int(top))\" width=\"\(String(format: "%.1f", width))\" "
                + "data-w=\"\(String(format: "%.2f", width))\" height=\"\(Int(height))\" fill=\"\(colour)\"/></g>\n"
        }
        let name = "radio (\(Self.escape(radio.model)))"
        let fixed = "<text class=\"lane\" x=\"4\" y=\"\(Int(top + 11))\">\(name)</text>\n"
        let ticks = Self.timeAxis(
            end: end, x: scale.x, lineClass: "tick", from: top, to: axis, labelY: Int(axis + 14))
        let viewHeight = Int(axis + 22)
        let left = Self.plotLeft, right = Self.plotRight, room = Self.axisLabelRoom
        let clip =
            "<defs><clipPath id=\"radio-clip-\(index)\"><rect x=\"\(Int(left - 1))\" y=\"0\" "
            + "width=\"\(Int(right - left + 2))\" height=\"\(viewHeight)\"/></clipPath>"
            + "<clipPath id=\"radio-axis-clip-\(index)\"><rect x=\"\(Int(left - room))\" y=\"0\" "
            + "width=\"\(Int(right - left + 2 * room))\" height=\"\(viewHeight)\"/></clipPath></defs>\n"
        let picture =
            "<svg class=\"timeline radio-lane\" id=\"radio-\(index)\" viewBox=\"0 0 \(Int(Self.viewWidth)) \(viewHeight)\" "
            + "width=\"100%\" role=\"img\" aria-label=\"radio\" data-end=\"\(Self.number(end))\" "
            + "data-left=\"\(Int(left))\" data-right=\"\(Int(right))\" data-axis=\"\(Int(axis))\" data-top=\"\(Int(top))\">\n"
            + clip + fixed
            + "<g class=\"axis-ticks\" clip-path=\"url(#radio-axis-clip-\(index))\">" + ticks + "</g>\n"
            + "<g class=\"zoomable\" clip-path=\"url(#radio-clip-\(index))\">\n" + svg + "</g>\n"
            + "<rect class=\"brush\" x=\"0\" y=\"0\" width=\"0\" height=\"\(viewHeight)\"/></svg>\n"
        return picture + Self.radioTotals(radio)
    }

    /// The totals and the colours' meaning, under the lane.
    static func radioTotals(_ radio: ReportScenario.Radio) -> String {
        var keys = ""
        for (state, colour) in Self.radioColours {
            keys +=
                "<span class=\"key\" style=\"background:\(colour)\"></span>\(state == .secondTail ? "second tail" : state.rawValue) "
        }
        let share = RadioReport.percentText(radio.onShare)
        let totals =
            "radio (\(Self.escape(radio.model))): on \(String(format: "%.1f", radio.onSeconds)) s of "
            + "\(String(format: "%.1f", radio.windowSeconds)) s (\(share)), \(radio.promotions) "
            + "promotion\(radio.promotions == 1 ? "" : "s") (\(String(format: "%.1f", radio.promotionsPerMinute))/min), "
            + "≈ \(RadioReport.energyText(radio.joules))"
        return "<p class=\"legend radio-totals\">\(totals) · \(keys)(idle: blank) · \(Self.escape(radio.source))</p>\n"
    }

    /// The most intervals one lane draws (a long run of polls stays readable and small).
    static let maxRadioIntervals = 4_000
}
