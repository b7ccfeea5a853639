import CYaml

/// How big a YAML document is once its aliases are expanded, measured before it is composed.
///
/// An alias (`*a`) stands for the whole node its anchor (`&a`) named, so a few hundred bytes of
/// anchors that each list the one before nine times stand for 9⁹ nodes ("billion laughs"). Yams
/// composes such a document cheaply (an alias shares its node), but everything that walks the
/// tree afterwards — the tag check, the decoders, the hashing of a mapping's keys for duplicates —
/// walks every expanded node, and hangs. This pass reads libyaml's events once, in linear time,
/// counts each node as often as it would be walked, and stops at the first event that takes the
/// count past the limit.
///
/// ```
///  a: &a [x, x, x]          a  = 1 + 3          = 4
///  b: &b [*a, *a, *a]       b  = 1 + 3·4        = 13
///  c: [*b, *b, *b]          c  = 1 + 3·13       = 40   … document total 1 + 3 keys + 4 + 13 + 40
/// ```
enum YAMLExpansion {
    /// More nodes than any profile or scenario needs (a long timeline has a few thousand).
    static let maximumNodes = 200_000

    /// Where the document went past `limit` nodes, as libyaml counts lines and columns (from 1),
    /// or nil when it stays within it (or does not parse: composing it reports that).
    static func firstExcess(in yaml: String, limit: Int = Self.maximumNodes) -> (line: Int, column: Int)? {
        var bytes = Array(yaml.utf8)
        return bytes.withUnsafeMutableBufferPointer { buffer in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { return nil }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var counter = Counter(limit: limit)
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT { return nil }
                if !counter.take(event) {
                    return (Int(event.start_mark.line) + 1, Int(event.start_mark.column) + 1)
                }
            }
        }
    }

    /// The expanded count of the document so far and of each anchor, with the collections open.
    private struct Counter {
        let limit: Int
        var total = 0
        var anchors: [String: Int] = [:]
        /// Open sequences and mappings: their anchor and their expanded size so far.
        var open: [(anchor: String?, size: Int)] = []

        init(limit: Int) { self.limit = limit }

        /// Counts one event; false once the document is past the limit.
        mutating func take(_ event: yaml_event_t) -> Bool {
            switch event.type {
            case YAML_SCALAR_EVENT:
                self.add(1, anchor: Self.name(event.data.scalar.anchor))
            case YAML_ALIAS_EVENT:
                self.add(Self.name(event.data.alias.anchor).flatMap { self.anchors[$0] } ?? 1, anchor: nil)
            case YAML_SEQUENCE_START_EVENT:
                self.open.append((Self.name(event.data.sequence_start.anchor), 1))
                self.total += 1
            case YAML_MAPPING_START_EVENT:
                self.open.append((Self.name(event.data.mapping_start.anchor), 1))
                self.total += 1
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let closed = self.open.popLast() else { break }
                if let anchor = closed.anchor { self.anchors[anchor] = closed.size }
                if !self.open.isEmpty {
                    self.open[self.open.count - 1].size = self.capped(self.open[self.open.count - 1].size + closed.size)
                }
            default:
                break
            }
            return self.total <= self.limit
        }

        /// A node of `size` expanded nodes, complete: into its parent and the total.
        private mutating func add(_ size: Int, anchor: String?) {
            if let anchor { self.anchors[anchor] = size }
            self.total = self.capped(self.total + size)
            if !self.open.isEmpty {
                self.open[self.open.count - 1].size = self.capped(self.open[self.open.count - 1].size + size)
            }
        }

        /// Sizes stop growing just past the limit, so no sum can overflow.
        private func capped(_ value: Int) -> Int { min(value, self.limit + 1) }

        private static func name(_ anchor: UnsafeMutablePointer<yaml_char_t>?) -> String? {
            anchor.map { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
        }
    }
}
