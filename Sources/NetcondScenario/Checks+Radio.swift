import Foundation
import NetcondCore

/// `radio`: the device's radio (the profile's `radio:`, followed by ``RadioModel`` from what crossed
/// the access link) was on for at most `max_on_share` of the client's deadline (``RunEvidence/radioWindow``) and woke at most
/// `max_promotions_per_minute` times a minute.
///
/// ```
///  polls every 3 s:  [p][a][tail][a][tail][a][tail][a][tail] …   on 97% of the run: fails
///  one batch:        [p][a][tail 10 s ]      idle      [p][a]    on 36%: passes
/// ```
extension Checks {
    static func radio(_ check: RadioCheck, _ evidence: RunEvidence) -> CheckResult {
        guard let radio = evidence.radio else {
            return CheckResult(
                name: "radio", passed: false,
                evidence: "no radio to judge: the run's profile has no radio: key (e.g. radio: lte)")
        }
        var failures: [String] = []
        var allowed: [String] = []
        if let share = check.maxOnShare {
            allowed.append("≤ \(Self.percent(share.value))")
            if radio.onShare > share.value + 1e-9 {
                failures.append("on \(Self.percent(radio.onShare)) of the run, more than \(Self.percent(share.value))")
            }
        }
        if let rate = check.maxPromotionsPerMinute {
            allowed.append("≤ \(Self.factor(rate))/min")
            if radio.promotionsPerMinute > rate + 1e-9 {
                failures.append(
                    "\(String(format: "%.1f", radio.promotionsPerMinute)) promotions a minute, more than \(Self.factor(rate))"
                )
            }
        }
        let seen =
            "radio on \(String(format: "%.1f", radio.onSeconds)) s of \(String(format: "%.1f", radio.window)) s "
            + "(\(Self.percent(radio.onShare))), \(radio.promotions) promotion\(radio.promotions == 1 ? "" : "s") "
            + "(\(String(format: "%.1f", radio.promotionsPerMinute))/min), ≈ \(RadioReport.energyText(radio.joules))"
        var details = [
            "model \(radio.spec.model.rawValue) (\(radio.spec.source)): promotion \(radio.spec.promotion), "
                + "on for \(radio.spec.afterLastPacket) after the last packet"
        ]
        details += failures
        return CheckResult(
            name: "radio", passed: failures.isEmpty,
            evidence: seen + "; allowed " + allowed.joined(separator: ", "), details: details)
    }

    /// `97%`, `36.5%` under 10%.
    static func percent(_ share: Double) -> String {
        let value = share * 100
        return value < 10 && value != value.rounded() ? String(format: "%.1f%%", value) : "\(Int(value.rounded()))%"
    }
}
