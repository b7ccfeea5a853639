import Foundation
import NetcondCore

/// The endpoints of ``ControlAPI/route(method:target:body:)`` that read a body or have more than
/// one method: each a pure function from the request to its route or its rejection.
extension ControlAPI {
    static func wrongMethod(_ method: String, _ path: String, allowed: String) -> Result<Route, Rejection> {
        .failure(Rejection(status: 405, message: "\(method) \(path) is not supported; allowed: \(allowed) \(path)"))
    }

    /// `POST /outage` (with its behaviour) or `DELETE /outage`; nil for another method.
    static func outage(method: String, body: [UInt8]) -> Result<Route, Rejection>? {
        switch method {
        case "DELETE": return .success(.command(.outage(nil)))
        case "POST":
            return Self.object(body, example: #"{"behaviour": "blackhole"}"#).flatMap { object in
                let value = object["behaviour"] ?? object["behavior"]
                return Self.word(value, key: "behaviour", among: OutageBehaviour.allCases.map(\.rawValue))
                    .map { .command(.outage(OutageBehaviour(rawValue: $0))) }
            }
        default: return nil
        }
    }

    /// `POST /stall` (with its direction) or `DELETE /stall`; nil for another method.
    static func stall(method: String, body: [UInt8]) -> Result<Route, Rejection>? {
        switch method {
        case "DELETE": return .success(.command(.stall(nil)))
        case "POST":
            return Self.object(body, example: #"{"direction": "down"}"#).flatMap { object in
                Self.word(object["direction"], key: "direction", among: StallDirection.allCases.map(\.rawValue))
                    .map { .command(.stall(StallDirection(rawValue: $0))) }
            }
        default: return nil
        }
    }

    /// `POST /captive`'s body: `{"open": true}` or `{"open": false}`.
    static func captive(_ body: [UInt8]) -> Result<Route, Rejection> {
        Self.object(body, example: #"{"open": true}"#).flatMap { object in
            guard let open = object["open"] as? Bool else {
                let message = "'open' is missing or not true/false; allowed: {\"open\": true} or {\"open\": false}"
                return .failure(Rejection(status: 400, message: message))
            }
            return .success(.command(.captive(open: open)))
        }
    }

    /// `POST /cut`'s body: none (a reset), or `{"mode": "reset"}` or `{"mode": "close"}`.
    static func cut(_ body: [UInt8]) -> Result<Route, Rejection> {
        guard !body.isEmpty else { return .success(.command(.cut(.reset))) }
        return Self.object(body, example: #"{"mode": "reset"} or {"mode": "close"}"#).flatMap { object in
            guard object["mode"] != nil else { return .success(.command(.cut(.reset))) }
            return Self.word(object["mode"], key: "mode", among: CutMode.allCases.map(\.rawValue))
                .map { .command(.cut(CutMode(rawValue: $0)!)) }
        }
    }

    /// `POST /handover` with the profile as `POST /profile` takes it and `gap` (`"2s"`; default none).
    static func handover(_ body: [UInt8]) -> Result<Route, Rejection> {
        let example = #"{"name": "lte", "gap": "2s"} or {"yaml": "…", "gap": "2s"}"#
        return Self.object(body, example: example).flatMap { object in
            var gap = Span.zero
            if let value = object["gap"] {
                guard let text = value as? String, let span = try? Span.parse(text), span <= .seconds(3600)
                else {
                    return .failure(
                        Rejection(status: 400, message: "'gap' must be a duration such as \"2s\" (0…1h); \(example)"))
                }
                gap = span
            }
            var profile = object
            profile["gap"] = nil
            return Self.profile(profile).map { route in
                guard case .command(.switchProfile(let switched)) = route else { return route }
                return .command(.handover(switched, gap: gap))
            }
        }
    }

    /// `GET /faults`, `POST /faults` (with a fault) or `DELETE /faults`; nil for another method.
    static func faults(method: String, body: [UInt8]) -> Result<Route, Rejection>? {
        switch method {
        case "GET": return .success(.faults)
        case "DELETE": return .success(.command(.removeFault(nil)))
        case "POST":
            guard !body.isEmpty else {
                return .failure(Rejection(status: 400, message: "expected a fault, e.g. \(HTTPFault.example)"))
            }
            do {
                let fault = try HTTPFault.decode(yaml: String(decoding: body, as: UTF8.self), file: "body")
                return .success(.command(.addFault(fault)))
            } catch {
                return .failure(Rejection(status: 400, message: "\(error)"))
            }
        default: return nil
        }
    }

    /// `DELETE /faults/ID` (one fault) or `DELETE /faults/NAME` (every fault of that name).
    static func removeFault(_ path: String) -> Result<Route, Rejection> {
        let raw = String(path.dropFirst("/faults/".count))
        let key = raw.removingPercentEncoding ?? ""
        if let id = Int(key), id > 0 { return .success(.command(.removeFault(id))) }
        guard !key.isEmpty, Int(key) == nil, !key.contains("/") else {
            let message = "'\(raw)' is not a fault id or name; allowed: a number or a name from GET /faults"
            return .failure(Rejection(status: 400, message: message))
        }
        return .success(.command(.removeFaultsNamed(key)))
    }
}
