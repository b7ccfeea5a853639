import Foundation

/// The radio of the device at the client's end of the access link, as a profile's `radio:` key
/// describes it: how long it takes to wake, how long it stays powered after the last packet, and
/// what each state draws. ``RadioModel`` follows it from the packets that cross the access link.
///
/// ```
///  packet ─▶ idle ──promotion──▶ active ──(inactivity after the last packet)──▶ tail ─▶ second tail ─▶ idle
///             ▲                    ▲                                            │          │
///             └────────────────────┴──────────── a packet during a tail ────────┴──────────┘
/// ```
///
/// The defaults are published models (see `Profiles/README.md`, "The radio"), every constant
/// settable. LTE, 3G and Wi-Fi: AT&T's Application Resource Optimizer (ARO), its default device
/// profiles (`ProfileLTE`, `Profile3G`, `ProfileWiFi`); 3G's timers also Android's "Optimizing
/// downloads" guidance (2 s to wake, 5 s at full power, 12 s at low power: about 20 s of radio
/// per poll). 5G: no ARO model exists; non-standalone 5G keeps the LTE anchor's RRC timers, so
/// netcond takes LTE's timers and powers (illustrative: 5G modems draw more, so the energy is a
/// lower bound).
public struct RadioSpec: Sendable, Equatable {
    /// Which published model the defaults come from.
    public enum Model: String, Sendable, Equatable, CaseIterable {
        case lte
        case threeG = "3g"
        case fiveG = "5g"
        case wifi
    }

    public var model: Model
    /// From idle to active: how long the radio takes to wake (traffic waits meanwhile on a real
    /// device; netcond only observes, see ``RadioModel``).
    public var promotion: Span
    public var promotionPower: Power
    /// While packets cross, and for `inactivity` after the last one.
    public var activePower: Power
    public var inactivity: Span
    /// The first tail after `inactivity`: powered, nothing to send (LTE's DRX, 3G's DCH).
    public var tail: Span
    public var tailPower: Power
    /// A second, lower tail after the first (3G's FACH; zero for the others).
    public var secondTail: Span
    public var secondTailPower: Power
    /// Asleep (paging only).
    public var idlePower: Power

    public init(
        model: Model, promotion: Span, promotionPower: Power, activePower: Power, inactivity: Span, tail: Span,
        tailPower: Power, secondTail: Span = .zero, secondTailPower: Power = .zero, idlePower: Power
    ) {
        self.model = model
        self.promotion = promotion
        self.promotionPower = promotionPower
        self.activePower = activePower
        self.inactivity = inactivity
        self.tail = tail
        self.tailPower = tailPower
        self.secondTail = secondTail
        self.secondTailPower = secondTailPower
        self.idlePower = idlePower
    }

    /// The published model's constants.
    public static func defaults(_ model: Model) -> RadioSpec {
        switch model {
        case .lte, .fiveG:
            // ARO ProfileLTE: promotion 0.26 s at 1.21 W; continuous reception 1.2 W (its β, without
            // the per-Mbit/s terms) for the 100 ms inactivity timer; then 20 ms short DRX and 10 s
            // long DRX at 1.06 W (one 10 s tail here); idle 0 W but a 43 ms page every 1.28 s at
            // 0.594 W, ≈ 0.02 W on average.
            return RadioSpec(
                model: model, promotion: .milliseconds(260), promotionPower: Power(milliwatts: 1210),
                activePower: Power(milliwatts: 1200), inactivity: .milliseconds(100), tail: .seconds(10),
                tailPower: Power(milliwatts: 1060), idlePower: Power(milliwatts: 20))
        case .threeG:
            // ARO Profile3G: idle → DCH 2 s at 0.53 W; DCH 0.7 W until 5 s after the last packet
            // (100 ms of it counted as active here, 4.9 s as the tail: the same power), then FACH
            // 0.35 W for 12 s; idle 0 W.
            return RadioSpec(
                model: model, promotion: .seconds(2), promotionPower: Power(milliwatts: 530),
                activePower: Power(milliwatts: 700), inactivity: .milliseconds(100), tail: .milliseconds(4900),
                tailPower: Power(milliwatts: 700), secondTail: .seconds(12), secondTailPower: Power(milliwatts: 350),
                idlePower: .zero)
        case .wifi:
            // ARO ProfileWiFi: no promotion; active 0.403 W until 0.25 s after the last packet
            // (100 ms active, 150 ms tail here: the same power); standby 0.02 W.
            return RadioSpec(
                model: model, promotion: .zero, promotionPower: .zero, activePower: Power(milliwatts: 403),
                inactivity: .milliseconds(100), tail: .milliseconds(150), tailPower: Power(milliwatts: 403),
                idlePower: Power(milliwatts: 20))
        }
    }

    /// Where the defaults come from, for reports.
    public var source: String {
        switch self.model {
        case .lte: return "AT&T ARO LTE model"
        case .threeG: return "AT&T ARO 3G model (Android's guidance: ~20 s of radio per transfer)"
        case .fiveG: return "LTE's timers and powers (non-standalone 5G keeps the LTE anchor's; illustrative)"
        case .wifi: return "AT&T ARO Wi-Fi model"
        }
    }

    /// After the last packet, how long until the radio is idle again.
    public var afterLastPacket: Span { self.inactivity + self.tail + self.secondTail }

    /// What a state draws.
    public func power(_ state: RadioState) -> Power {
        switch state {
        case .idle: return self.idlePower
        case .promotion: return self.promotionPower
        case .active: return self.activePower
        case .tail: return self.tailPower
        case .secondTail: return self.secondTailPower
        }
    }
}

/// The states of ``RadioModel``; the raw values are the reports' names.
public enum RadioState: String, Sendable, Equatable, CaseIterable {
    case idle
    case promotion
    case active
    case tail
    case secondTail = "second-tail"

    /// Every state but idle keeps the radio powered.
    public var isOn: Bool { self != .idle }
}

/// Electrical power, held in milliwatts (`1.06W`, `1060mW` in a profile).
public struct Power: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var milliwatts: Int64

    public init(milliwatts: Int64) {
        self.milliwatts = milliwatts
    }

    public static let zero = Power(milliwatts: 0)
    public var watts: Double { Double(self.milliwatts) / 1000 }

    public static func < (lhs: Power, rhs: Power) -> Bool { lhs.milliwatts < rhs.milliwatts }

    /// `1.06W`, `20mW`.
    public var description: String {
        if self.milliwatts % 1000 == 0 || self.milliwatts >= 1000 {
            var text = String(format: "%.3f", self.watts)
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
            return text + "W"
        }
        return "\(self.milliwatts)mW"
    }

    /// `1.06W`, `1060mW`, `0`; at most 100 W.
    public static func parse(_ text: String) throws(RadioSpec.PowerError) -> Power {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "0" { return .zero }
        let (number, scale): (Substring, Double)
        if trimmed.lowercased().hasSuffix("mw") {
            (number, scale) = (trimmed.dropLast(2), 1)
        } else if trimmed.hasSuffix("W") || trimmed.hasSuffix("w") {
            (number, scale) = (trimmed.dropLast(1), 1000)
        } else {
            throw RadioSpec.PowerError(
                message: Double(trimmed) != nil
                    ? "'\(trimmed)' has no unit; allowed: watts W or milliwatts mW (e.g. 1.06W, 20mW)"
                    : "'\(trimmed)' is not a power; allowed: watts W or milliwatts mW (e.g. 1.06W, 20mW)")
        }
        guard let value = Double(number.trimmingCharacters(in: .whitespaces)), value.isFinite, value >= 0,
            value * scale <= 100_000
        else {
            throw RadioSpec.PowerError(
                message:
                    "'\(trimmed)' is not a power from 0 to 100W; allowed: watts W or milliwatts mW (e.g. 1.06W, 20mW)")
        }
        return Power(milliwatts: Int64((value * scale).rounded()))
    }
}

extension RadioSpec {
    /// A power that could not be read.
    public struct PowerError: Error, Sendable, Equatable {
        public var message: String
    }
}
