import Testing

@testable import NetcondPacket

/// `dns_fail` under the packet engine: the question read from a query, and the NXDOMAIN answer
/// built in the server's place.
@Suite struct DNSFailureTests {
    /// A UDP/IPv4 query from 127.0.0.1:40000 to 127.0.0.53:53 for `name` (type A), id 0xbeef, RD set.
    static func query(_ name: String, version: UInt8 = 4) -> [UInt8] {
        var dns: [UInt8] = [0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
        for label in name.split(separator: ".") {
            dns.append(UInt8(label.utf8.count))
            dns += Array(label.utf8)
        }
        dns += [0, 0, 1, 0, 1]
        let udp: [UInt8] = [0x9c, 0x40, 0, 53, UInt8((8 + dns.count) >> 8), UInt8((8 + dns.count) & 0xff), 0, 0]
        var ip: [UInt8]
        if version == 6 {
            ip = [0x60, 0, 0, 0, 0, UInt8(udp.count + dns.count), 17, 64]
            ip += [UInt8](repeating: 0, count: 15) + [1] + [UInt8](repeating: 0, count: 15) + [2]
        } else {
            let total = 20 + udp.count + dns.count
            ip = [
                0x45, 0, UInt8(total >> 8), UInt8(total & 0xff), 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0,
                53,
            ]
        }
        return ip + udp + dns
    }

    @Test func theQuestionsNameIsRead() {
        #expect(DNSFailure.question(Self.query("API.Example.invalid"))?.name == "api.example.invalid")
        #expect(DNSFailure.question(Self.query("x.invalid", version: 6))?.name == "x.invalid")
        var answer = Self.query("x.invalid")
        answer[30] |= 0x80  // QR: a response, not a query
        #expect(DNSFailure.question(answer) == nil)
        var truncated = Self.query("x.invalid")
        truncated.removeLast(6)
        #expect(DNSFailure.question(truncated) == nil)
        var otherPort = Self.query("x.invalid")
        otherPort[23] = 54
        #expect(DNSFailure.question(otherPort) == nil)
    }

    @Test(arguments: [UInt8(4), UInt8(6)])
    func theAnswerIsNXDOMAINFromTheServerToTheQuerier(version: UInt8) throws {
        let query = Self.query("gone.invalid", version: version)
        let question = try #require(DNSFailure.question(query))
        let reply = DNSFailure.reply(to: query, question: question)
        let ip = version == 6 ? 40 : 20
        if version == 6 {
            #expect(Array(reply[8..<24]) == Array(query[24..<40]) && Array(reply[24..<40]) == Array(query[8..<24]))
            #expect(Int(reply[4]) << 8 | Int(reply[5]) == reply.count - 40)
        } else {
            #expect(Array(reply[12..<16]) == [127, 0, 0, 53] && Array(reply[16..<20]) == [127, 0, 0, 1])
            #expect(Int(reply[2]) << 8 | Int(reply[3]) == reply.count)
        }
        // Ports swapped, UDP length right.
        #expect(Array(reply[ip..<(ip + 4)]) == [0, 53, 0x9c, 0x40])
        #expect(Int(reply[ip + 4]) << 8 | Int(reply[ip + 5]) == reply.count - ip)
        let dns = ip + 8
        #expect(Array(reply[dns..<(dns + 2)]) == [0xbe, 0xef])
        #expect(reply[dns + 2] == 0x81 && reply[dns + 3] & 0x0f == 3, "a response, RD kept, RCODE 3")
        #expect(Array(reply[(dns + 4)..<(dns + 12)]) == [0, 1, 0, 0, 0, 0, 0, 0])
        #expect(Array(reply[(dns + 12)...]) == Array(query[(dns + 12)...]), "the question, as asked")
    }
}
