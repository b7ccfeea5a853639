import NetcondCore
import NetcondOrigin

/// `delivers`: changes the client made while the network was down reach the server once it is
/// back: all of them, each once, in the order they were made, soon after the return.
///
/// Read from the origin's log of the POST endpoint: a change is the object a call created, placed
/// by its `Idempotency-Key`, whose last number is the change's (`change-3`). A repeat with the same
/// key creates nothing (the origin replays the first answer), so only a client that lost a change,
/// sent one twice under different keys (or none), or sent them out of order fails; the origin
/// decides what was created, not the client.
///
/// ```
///  outage ████████████│ back
///  calls   ✗  ✗  ✗    │ 1 2 3 (2 again: replayed)  ✓ each once, in order, within `within`
///                     │ 1 3                        ✗ change 2 never arrived
///                     │ 1 2 3 2'                   ✗ change 2 created twice
/// ```
extension Checks {

    static func delivers(_ check: DeliversCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "delivers"
        let path = OriginAPI.path(of: check.api)
        let back = Self.returnMoment(nominal: check.returnsAt.seconds, evidence)
        let calls = evidence.requests.filter { $0.method == "POST" && $0.path == path }
        guard !calls.isEmpty else {
            return CheckResult(
                name: name, passed: false,
                evidence:
                    "no POST to \(path) reached the origin (\(Self.count(check.count, "change", "changes")) wanted)"
            )
        }
        let details = calls.map(Self.describeCall)
        // Each object created, in the order created, with the change its key names.
        let created = calls.compactMap { call -> (call: RunEvidence.Request, id: Int, change: Int?)? in
            guard case .created(let id)? = call.effect else { return nil }
            return (call, id, call.idempotencyKey.flatMap(Self.changeNumber))
        }
        var problems: [String] = []
        let unplaced = created.filter { $0.change.map { !(1...check.count).contains($0) } ?? true }
        for object in unplaced {
            let key = object.call.idempotencyKey.map { "key '\(Self.clip($0, to: 40))'" } ?? "no Idempotency-Key"
            problems.append(
                "object #\(object.id) (+\(Self.seconds(object.call.at)), \(key)) is none of changes 1…\(check.count)")
        }
        let placed = created.filter { object in object.change.map { (1...check.count).contains($0) } ?? false }
        var seen: [Int: [(call: RunEvidence.Request, id: Int, change: Int?)]] = [:]
        for object in placed { seen[object.change!, default: []].append(object) }
        let missing = (1...check.count).filter { seen[$0] == nil }
        if !missing.isEmpty {
            problems.insert(
                "\(missing.count == 1 ? "change" : "changes") \(Self.elided(missing.map(String.init))) never arrived",
                at: 0)
        }
        for change in 1...check.count {
            guard let objects = seen[change], objects.count > 1 else { continue }
            let keys = objects.map { $0.call.idempotencyKey.map { "'\(Self.clip($0, to: 40))'" } ?? "none" }
            problems.append(
                "change \(change) was created \(objects.count) times (objects \(objects.map { "#\($0.id)" }.joined(separator: ", ")), keys \(keys.joined(separator: ", ")))"
            )
        }
        let order = placed.map { $0.change! }
        if let step = zip(order, order.dropFirst()).first(where: { $0.1 < $0.0 }) {
            problems.append("out of order: change \(step.1) arrived after change \(step.0)")
        }
        let arrived = Set(order).count
        let last = placed.last.map(\.call.at)
        var timing = ""
        if let last {
            timing =
                last <= back
                ? "the last at +\(Self.seconds(last)), before the network came back at +\(Self.seconds(back))"
                : "the last at +\(Self.seconds(last)), \(Self.seconds(last - back)) after the network came back at +\(Self.seconds(back)) (\(formatSeconds(check.within)) allowed)"
            if last - back > check.within.seconds {
                problems.append(
                    "the last arrived \(Self.seconds(last - back)) after the network came back at +\(Self.seconds(back)) (\(formatSeconds(check.within)) allowed)"
                )
            }
        }
        let summary = "\(arrived) of \(check.count) changes arrived at \(path)"
        if let problem = problems.first {
            let more = problems.count > 1 ? " (and \(problems.count - 1) more)" : ""
            return CheckResult(
                name: name, passed: false, evidence: "\(summary): \(problem)\(more)",
                details: problems.dropFirst().map { "also: \($0)" } + details)
        }
        let replayed = calls.filter { if case .replayed? = $0.effect { true } else { false } }.count
        let repeats = replayed == 0 ? "" : ", \(Self.count(replayed, "repeat", "repeats")) replayed by key"
        return CheckResult(
            name: name, passed: true, evidence: "\(summary), each once and in order\(repeats); \(timing)",
            details: details)
    }

    /// `+6.30s created #3, response lost, key 'change-3'`.
    private static func describeCall(_ call: RunEvidence.Request) -> String {
        var text = "+\(Self.seconds(call.at)) "
        switch call.effect {
        case .created(let id)?: text += "created #\(id)"
        case .replayed(let id)?: text += "replayed #\(id)"
        case nil: text += "nothing created (\(call.status.map { "\($0)" } ?? "no answer"))"
        }
        if call.effect != nil && call.status == nil { text += ", response lost" }
        text += call.idempotencyKey.map { ", key '\(Self.clip($0, to: 40))'" } ?? ", no Idempotency-Key"
        return text
    }

    /// The change a key names: its last number (`change-3` → 3, `order-12-v2` → 2).
    static func changeNumber(_ key: String) -> Int? {
        var digits = ""
        for character in key.reversed() {
            if character.isASCII && character.isNumber {
                digits.insert(character, at: digits.startIndex)
            } else if !digits.isEmpty {
                break
            }
        }
        return digits.count <= 9 ? Int(digits) : nil
    }

    /// When the network came back: the link's own change out of the outage, at or after the
    /// timeline's moment for it (a loaded machine applies an event a little late, and the client
    /// is judged from when its network was back, never before); the timeline's moment when the
    /// link recorded none.
    static func returnMoment(nominal: Double, _ evidence: RunEvidence) -> Double {
        let change = evidence.linkEvents.first { event in
            event.kind == .link && event.at >= nominal - 0.1 && event.detail.hasPrefix("link: ")
                && !event.detail.contains("outage (")
        }
        return max(nominal, change?.at ?? nominal)
    }
}
