import Foundation
import NetcondCore

/// An error in Toxiproxy's own shape, `{"error": "…", "status": N}` with that HTTP status, so that
/// Toxiproxy's client libraries raise what they raise against Toxiproxy (404: not found, 409:
/// exists, 400: invalid). The messages start as Toxiproxy's do; netcond adds what was wrong and
/// what is allowed after a colon.
public struct ToxiproxyError: Error, Equatable, Sendable {
    public var message: String
    public var status: Int

    public init(message: String, status: Int) {
        self.message = message
        self.status = status
    }

    static let proxyNotFound = ToxiproxyError(message: "proxy not found", status: 404)
    static let proxyExists = ToxiproxyError(message: "proxy already exists", status: 409)
    static let toxicNotFound = ToxiproxyError(message: "toxic not found", status: 404)
    static let toxicExists = ToxiproxyError(message: "toxic already exists", status: 409)
    static let invalidStream = ToxiproxyError(
        message: "stream was invalid, can be either upstream or downstream", status: 400)

    static func badBody(_ why: String) -> ToxiproxyError {
        ToxiproxyError(message: "bad request body: \(why)", status: 400)
    }
    static func missingField(_ name: String) -> ToxiproxyError {
        ToxiproxyError(message: "missing required field: \(name)", status: 400)
    }

    public var json: [UInt8] {
        let object: [String: Any] = ["error": self.message, "status": self.status]
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }
}

/// One Toxiproxy toxic as its API describes it: a type with its attributes, on one stream
/// (`upstream`: client to server; `downstream`: server to client), applied to a share of the
/// connections (`toxicity`).
public struct Toxic: Equatable, Sendable {
    public enum Stream: String, Sendable, CaseIterable {
        case upstream
        case downstream

        /// netcond's name for the same direction.
        public var direction: Direction { self == .upstream ? .up : .down }
    }

    /// The types netcond takes, with their attributes (whole numbers, in Toxiproxy's units).
    public enum Kind: Equatable, Sendable {
        /// `latency` ms added to every byte, ± `jitter` ms.
        case latency(latency: Int64, jitter: Int64)
        /// At most `rate` KB/s (1 KB = 1,000 bytes) of payload, per connection (0: no limit).
        case bandwidth(rate: Int64)
        /// Nothing passes; the connection is closed once `timeout` ms pass without data (0: never).
        case timeout(timeout: Int64)
        /// The next data is not passed on, and the connection is reset `timeout` ms later (0: at once).
        case resetPeer(timeout: Int64)
        /// The connection is closed once `bytes` bytes have passed.
        case limitData(bytes: Int64)
        /// The close (end of stream) is held back `delay` ms.
        case slowClose(delay: Int64)
        /// Data is cut into pieces of `averageSize` ± `sizeVariation` bytes, `delay` µs apart.
        case slicer(averageSize: Int64, sizeVariation: Int64, delay: Int64)
        /// Passes everything as it comes (Toxiproxy's placeholder type).
        case noop

        public static let typeNames = [
            "latency", "bandwidth", "timeout", "reset_peer", "limit_data", "slow_close", "slicer", "noop",
        ]

        var typeName: String {
            switch self {
            case .latency: return "latency"
            case .bandwidth: return "bandwidth"
            case .timeout: return "timeout"
            case .resetPeer: return "reset_peer"
            case .limitData: return "limit_data"
            case .slowClose: return "slow_close"
            case .slicer: return "slicer"
            case .noop: return "noop"
            }
        }

        /// Attribute names and values, in the order Toxiproxy lists them.
        var attributes: [(String, Int64)] {
            switch self {
            case .latency(let latency, let jitter): return [("latency", latency), ("jitter", jitter)]
            case .bandwidth(let rate): return [("rate", rate)]
            case .timeout(let timeout), .resetPeer(let timeout): return [("timeout", timeout)]
            case .limitData(let bytes): return [("bytes", bytes)]
            case .slowClose(let delay): return [("delay", delay)]
            case .slicer(let average, let variation, let delay):
                return [("average_size", average), ("size_variation", variation), ("delay", delay)]
            case .noop: return []
            }
        }

        /// The kind of `type` with `attributes` (missing ones are 0, as in Toxiproxy).
        static func make(type: String, attributes: [String: Int64]) -> Kind? {
            let a = { (name: String) in attributes[name] ?? 0 }
            switch type {
            case "latency": return .latency(latency: a("latency"), jitter: a("jitter"))
            case "bandwidth": return .bandwidth(rate: a("rate"))
            case "timeout": return .timeout(timeout: a("timeout"))
            case "reset_peer": return .resetPeer(timeout: a("timeout"))
            case "limit_data": return .limitData(bytes: a("bytes"))
            case "slow_close": return .slowClose(delay: a("delay"))
            case "slicer":
                return .slicer(averageSize: a("average_size"), sizeVariation: a("size_variation"), delay: a("delay"))
            case "noop": return .noop
            default: return nil
            }
        }

        /// Under `--netcond-link`, whether the toxic acts on each connection on its own (so
        /// `toxicity` can pick some of them), rather than on the link every connection shares.
        var isPerConnection: Bool {
            switch self {
            case .latency, .bandwidth, .timeout: return false
            case .resetPeer, .limitData, .slowClose, .slicer, .noop: return true
            }
        }
    }

    public var name: String
    public var stream: Stream
    public var toxicity: Double
    public var kind: Kind

    public init(name: String, stream: Stream, toxicity: Double = 1, kind: Kind) {
        self.name = name
        self.stream = stream
        self.toxicity = toxicity
        self.kind = kind
    }

    /// As Toxiproxy shows it: `{"name", "type", "stream", "toxicity", "attributes"}`.
    public var jsonObject: [String: Any] {
        [
            "name": self.name, "type": self.kind.typeName, "stream": self.stream.rawValue, "toxicity": self.toxicity,
            "attributes": Dictionary(uniqueKeysWithValues: self.kind.attributes.map { ($0.0, $0.1 as Any) }),
        ]
    }

    /// Decodes a toxic as `POST /proxies/{proxy}/toxics` sends it, or, with `updating`, the
    /// fields `POST /proxies/{proxy}/toxics/{toxic}` changes (the others keep their values).
    /// Defaults as Toxiproxy's: stream downstream, toxicity 1, name `TYPE_STREAM`, attributes 0.
    /// `onLink` (`--netcond-link`): latency, bandwidth and timeout set the link every connection
    /// shares, so their `toxicity` cannot pick connections and below 1 is refused.
    public static func decode(_ object: [String: Any], updating old: Toxic? = nil, onLink: Bool = false)
        throws(ToxiproxyError) -> Toxic
    {
        // A field that is null is left out, as Go's decoder leaves the default.
        let object = object.filter { !($0.value is NSNull) }
        let type: String
        if let old {
            if let given = object["type"], (given as? String) != old.kind.typeName {
                throw .badBody("a toxic's type cannot change (it is \(old.kind.typeName)); delete it and add a new one")
            }
            type = old.kind.typeName
        } else {
            guard let given = object["type"] as? String, !given.isEmpty else {
                throw ToxiproxyError(
                    message: "invalid toxic type: none given; allowed: \(Kind.typeNames.joined(separator: ", "))",
                    status: 400)
            }
            type = given
        }
        guard Kind.typeNames.contains(type) else {
            throw ToxiproxyError(
                message: "invalid toxic type: '\(type)'; allowed: \(Kind.typeNames.joined(separator: ", "))",
                status: 400)
        }
        var stream = old?.stream ?? .downstream
        if let given = object["stream"] {
            guard let text = given as? String, let value = Stream(rawValue: text.lowercased()) else {
                throw .invalidStream
            }
            if let old, value != old.stream {
                throw .badBody(
                    "a toxic's stream cannot change (it is \(old.stream.rawValue)); delete it and add a new one")
            }
            stream = value
        }
        var toxicity = old?.toxicity ?? 1
        if let given = object["toxicity"] {
            guard let number = given as? NSNumber, !Self.isBoolean(number), (0...1).contains(number.doubleValue) else {
                throw .badBody("toxicity must be a number from 0 to 1 (the share of connections it applies to)")
            }
            toxicity = number.doubleValue
        }
        var attributes = Dictionary(uniqueKeysWithValues: old?.kind.attributes ?? [])
        if let given = object["attributes"] {
            guard let map = given as? [String: Any] else {
                throw .badBody("attributes must be an object, e.g. {\"latency\": 100}")
            }
            try Self.decodeAttributes(map, type: type, into: &attributes)
        }
        let kind = Kind.make(type: type, attributes: attributes)!
        if onLink && toxicity < 1 && !kind.isPerConnection {
            throw .badBody(
                "toxicity \(toxicity) on a \(type) toxic: under --netcond-link a \(type) acts on the link every "
                    + "connection of the proxy shares, as a real network's does, so it cannot pick some connections; "
                    + "allowed: toxicity 1 (or leave it out), or run netcond toxiproxy without --netcond-link")
        }
        if case .slicer(let average, let variation, _) = kind, average == 0 || variation >= average {
            throw .badBody("slicer needs average_size ≥ 1 byte and size_variation below it")
        }
        var name = old?.name ?? "\(type)_\(stream.rawValue)"
        if old == nil, let given = object["name"] {
            guard let text = given as? String else { throw .badBody("name must be a string") }
            if !text.isEmpty { name = text }
        }
        guard !name.contains("/") else { throw .badBody("a toxic's name cannot contain '/'") }
        guard name.utf8.count <= 1_000 else {
            throw .badBody("a toxic's name is at most 1000 bytes (one longer could not be named in a URL)")
        }
        return Toxic(name: name, stream: stream, toxicity: toxicity, kind: kind)
    }

    /// The attributes of a `type` toxic in `map`, over those in `attributes`: whole numbers from 0
    /// to the type's most. Attributes the type does not have are ignored, as Toxiproxy ignores them
    /// (the toxic it answers with lists the ones it has).
    private static func decodeAttributes(_ map: [String: Any], type: String, into attributes: inout [String: Int64])
        throws(ToxiproxyError)
    {
        let known = Kind.make(type: type, attributes: [:])!.attributes.map(\.0)
        for (key, value) in map.sorted(by: { $0.key < $1.key }) where known.contains(key) && !(value is NSNull) {
            let unit = Self.unit(of: key, type: type)
            guard let number = value as? NSNumber, !Self.isBoolean(number),
                number.doubleValue == number.doubleValue.rounded(), let whole = Int64(exactly: number.doubleValue)
            else {
                throw .badBody("\(type) attribute '\(key)' must be a whole number (\(unit))")
            }
            guard whole >= 0 else {
                throw .badBody("\(type) attribute '\(key)' must be 0 or more (\(unit))")
            }
            let most = Self.maximum(of: key, type: type)
            guard whole <= most else {
                throw .badBody("\(type) attribute '\(key)' must be at most \(most) (\(unit))")
            }
            attributes[key] = whole
        }
    }

    /// The largest value an attribute takes: a day of milliseconds or microseconds, 100 GB/s, a petabyte.
    private static func maximum(of key: String, type: String) -> Int64 {
        switch Self.unit(of: key, type: type) {
        case "KB/s": return 100_000_000
        case "bytes": return 1 << 50
        case "microseconds": return 86_400_000_000
        default: return 86_400_000
        }
    }

    private static func unit(of key: String, type: String) -> String {
        switch (type, key) {
        case ("bandwidth", _): return "KB/s"
        case ("limit_data", _), ("slicer", "average_size"), ("slicer", "size_variation"): return "bytes"
        case ("slicer", "delay"): return "microseconds"
        default: return "milliseconds"
        }
    }

    /// JSON's true and false arrive as NSNumber too (a boolean one, type code "c").
    static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }
}

/// What a proxy's toxics ask of netcond: the link every connection of the proxy shares (latency,
/// jitter and a per-connection rate per direction, a stall while a `timeout` toxic is in force),
/// and what each connection meets on its own (``ToxicConnection``).
public struct ToxicConditions: Equatable, Sendable {
    public var profile: Profile
    public var stall: StallDirection?

    /// The link for `toxics` under the proxy `name`. Latencies and jitters of one stream add up (a
    /// chain of toxics, as in Toxiproxy); of several rates the lowest holds. Toxiproxy's latency L ±
    /// jitter J (uniform) is the link's latency L − J plus up to 2J (from 0 plus up to L + J when
    /// J > L). A rate is Toxiproxy's payload rate: the link's own (which counts 40 bytes of header
    /// per 1,460 of payload) is set so that the payload moves at exactly that rate.
    public init(toxics: [Toxic], name: String) {
        var up = LinkDirection()
        var down = LinkDirection()
        var stalled: Set<Direction> = []
        for toxic in toxics {
            var link = toxic.stream.direction == .up ? up : down
            switch toxic.kind {
            case .latency(let latency, let jitter):
                // Toxiproxy's delay is latency ± jitter, uniform; the link's is latency + U(0, jitter).
                let low = max(0, latency - jitter)
                link.latency = link.latency + .milliseconds(low)
                link.jitter = link.jitter + .milliseconds(latency + jitter - low)
            case .bandwidth(let rate) where rate > 0:  // 0: no limit, as in Toxiproxy
                let mss = Profile.defaultMSS.bytes
                let bits = Double(rate) * 8_000 * Double(mss + Profile.headerOverhead.bytes) / Double(mss)
                let wanted = Bandwidth(bitsPerSecond: Int64(bits.rounded()))
                link.connectionBandwidth = min(link.connectionBandwidth ?? wanted, wanted)
            case .timeout:
                stalled.insert(toxic.stream.direction)
            case .bandwidth, .resetPeer, .limitData, .slowClose, .slicer, .noop:
                break
            }
            if toxic.stream.direction == .up { up = link } else { down = link }
        }
        self.profile = Profile(
            name: "toxiproxy:\(name)", description: "Toxiproxy proxy \(name)", source: "toxiproxy API", up: up,
            down: down)
        switch (stalled.contains(.up), stalled.contains(.down)) {
        case (true, true): self.stall = .both
        case (true, false): self.stall = .up
        case (false, true): self.stall = .down
        case (false, false): self.stall = nil
        }
    }
}
