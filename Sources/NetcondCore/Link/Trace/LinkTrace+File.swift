import Foundation

extension LinkTrace {
    /// Reads a mahimahi trace file a piece at a time, never holding its text: the same lines,
    /// times and errors as ``parse(_:source:path:)``. Nil when the file is not plain ASCII
    /// without commas (a step series, or text ``parse`` must judge): read it whole then.
    ///
    /// Lines end as `textLines` ends them: LF, CR, CR LF (one end), vertical tab, form feed.
    static func readPlain(path: String, source: String, absolute: String) throws(ReadError) -> LinkTrace? {
        // First pass: plain or not, and how many lines (the times' room, reserved once).
        var lines = 1
        var plain = true
        let counted = Self.pieces(path) { bytes in
            for byte in bytes {
                if byte >= 0x80 || byte == UInt8(ascii: ",") {
                    plain = false
                    return false
                }
                if byte == 0x0A { lines += 1 }
            }
            return true
        }
        guard counted, plain else { return nil }
        var builder = Builder(reserving: lines)
        var lineNumber = 1
        var field: [UInt8] = []
        var comment = false
        var afterCR = false
        var failure: ReadError?
        func finishField() -> Bool {
            guard !field.isEmpty else { return true }
            defer { field.removeAll(keepingCapacity: true) }
            do {
                try builder.add(String(decoding: field, as: UTF8.self), line: lineNumber)
                return true
            } catch {
                failure = error
                return false
            }
        }
        let read = Self.pieces(path) { bytes in
            for byte in bytes {
                let wasCR = afterCR
                afterCR = false
                switch byte {
                case 0x0A where wasCR:
                    continue
                case 0x0A, 0x0B, 0x0C, 0x0D:
                    guard finishField() else { return false }
                    lineNumber += 1
                    comment = false
                    afterCR = byte == 0x0D
                case _ where comment:
                    continue
                case UInt8(ascii: "#"):
                    guard finishField() else { return false }
                    comment = true
                case UInt8(ascii: " "), UInt8(ascii: "\t"):
                    guard finishField() else { return false }
                default:
                    field.append(byte)
                }
            }
            return true
        }
        if let failure { throw failure }
        guard read, finishField() else {
            if let failure { throw failure }
            return nil
        }
        return try builder.trace(lines: lineNumber, source: source, path: absolute)
    }

    /// Feeds the file to `body` in pieces of 1 MB while it returns true; false when it stopped
    /// early or the file could not be read.
    private static func pieces(_ path: String, _ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        while true {
            let data: Data?
            do {
                data = try handle.read(upToCount: 1 << 20)
            } catch {
                return false
            }
            // Nil or empty: the end of the file.
            guard let data, !data.isEmpty else { return true }
            guard data.withUnsafeBytes(body) else { return false }
        }
    }
}
