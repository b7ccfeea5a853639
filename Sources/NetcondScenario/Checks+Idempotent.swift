import Foundation
import NetcondCore
import NetcondOrigin

#if canImport(Glibc)
import Glibc
#endif

/// `idempotent`: a lost response to a POST never produces a second side effect at the origin.
extension Checks {

    static func idempotent(_ check: IdempotentCheck, _ evidence: RunEvidence) -> CheckResult {
        let name = "idempotent"
        let path = OriginAPI.path(of: check.api)
        let calls = evidence.requests.filter { $0.method == "POST" && $0.path == path }
        guard !calls.isEmpty else {
            return CheckResult(name: name, passed: false, evidence: "the client never called POST \(path)")
        }
        let created = Set(
            calls.compactMap { call -> Int? in
                if case .created(let id)? = call.effect { return id }
                return nil
            })
        let lost = calls.filter { $0.effect != nil && $0.status == nil }
        let details = calls.map { call -> String in
            var text = "+\(Self.seconds(call.at)) "
            switch call.effect {
            case .created(let id)?: text += "created #\(id)"
            case .replayed(let id)?: text += "replayed #\(id)"
            case nil: text += "no effect"
            }
            if call.effect != nil && call.status == nil { text += ", response lost" }
            if let late = call.afterClientFIN {
                text +=
                    ", reached the origin \(Self.seconds(late)) after its client had closed (it was already on the link)"
            }
            text += call.idempotencyKey.map { ", key '\(Self.clip($0, to: 40))'" } ?? ", no Idempotency-Key"
            return text
        }
        let seen =
            "\(calls.count) POST\(calls.count == 1 ? "" : "s") to \(path): " + Self.elided(details.map { "(\($0))" })
        guard !lost.isEmpty else {
            return CheckResult(
                name: name, passed: false,
                evidence: "\(seen) — no response was lost, so nothing had to be repeated safely", details: details)
        }
        if created.count <= 1 {
            return CheckResult(
                name: name, passed: true, evidence: "\(seen) — \(created.count) object created", details: details)
        }
        let keys = calls.map(\.idempotencyKey)
        let why: String
        if keys.allSatisfy({ $0 == nil }) {
            why = "the retries carried no Idempotency-Key"
        } else if Set(keys.compactMap { $0 }).count > 1 {
            why = "the retries carried different Idempotency-Keys"
        } else {
            why = "not every call carried the Idempotency-Key"
        }
        return CheckResult(
            name: name, passed: false,
            evidence: "\(seen) — \(created.count) objects created for one intent (\(why))", details: details)
    }
}
