/// Finds a key written twice in one JSON object. Foundation's parser keeps one of the two without
/// a word, so `{"name": "edge", "name": "3g"}` would silently mean one of them: the control API
/// refuses such a body instead, naming the key.
///
/// A scan of the text, not a parser: it assumes the body is otherwise valid JSON (the real parser
/// runs too) and only tracks strings, nesting, and which strings are keys.
enum JSONDuplicateKeys {
    static func first(in body: [UInt8]) -> String? {
        // One set of keys per open container; nil for an array.
        var open: [Set<[UInt8]>?] = []
        var index = 0
        while index < body.count {
            switch body[index] {
            case UInt8(ascii: "{"):
                open.append([])
            case UInt8(ascii: "["):
                open.append(nil)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !open.isEmpty { open.removeLast() }
            case UInt8(ascii: "\""):
                let start = index + 1
                index = start
                while index < body.count, body[index] != UInt8(ascii: "\"") {
                    index += body[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                let text = Array(body[start..<min(index, body.count)])
                // A string is a key when the next thing after it is a colon, inside an object.
                var next = index + 1
                while next < body.count, [0x20, 0x09, 0x0A, 0x0D].contains(body[next]) { next += 1 }
                if next < body.count, body[next] == UInt8(ascii: ":"), var keys = open.last ?? nil {
                    if keys.contains(text) { return String(decoding: text, as: UTF8.self) }
                    keys.insert(text)
                    open[open.count - 1] = keys
                }
            default:
                break
            }
            index += 1
        }
        return nil
    }
}
