/// The lines of a text file, whatever ends them: `\n`, `\r\n` (one `Character` in Swift, so a
/// split on `"\n"` alone would read a CRLF file as one line) or a lone `\r`.
extension StringProtocol {
    public var textLines: [SubSequence] {
        self.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
    }
}
