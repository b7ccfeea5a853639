import NIOCore
import NetcondCore
import Testing

@testable import NetcondProxy

@Suite struct NoopToxicTests {
    @Test func everythingGoesOnAsItCame() {
        var toxic = NoopToxic()
        var random = SeededRandom(seed: 1)
        #expect(toxic.start(now: t(0)) == [])
        #expect(toxic.take(data("a", at: 3), now: t(9), random: &random) == [.pass(data("a", at: 3))])
        #expect(toxic.take(.end(.reset), now: t(9), random: &random) == [.pass(.end(.reset))])
        #expect(toxic.interrupt() == [])
        #expect(!toxic.closesWhenRemoved)
    }
}
