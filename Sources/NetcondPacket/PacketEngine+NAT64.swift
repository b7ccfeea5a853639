import CNetcondPacket
import NetcondCore

/// An IPv6-only run's NAT64 in the engine (``NAT64``). The link carries what the device's radio
/// carries, IPv6: the cage's packets to the prefix as they are, a server's IPv4 answers translated
/// as soon as they are read (so the link, its flow table and its routes see only the cage's IPv6
/// connections). When the link delivers one, the original is dropped and the translation goes
/// out on the raw sockets, marked as having crossed the link.
extension PacketEngine {
    /// The IPv6 bytes a packet is held as, when it takes part in NAT64: the cage's own packet to the
    /// prefix, or a server's IPv4 packet to the pool translated; an empty array for a packet to the
    /// pool that cannot be translated (dropped); nil for any other packet.
    func translating(_ packet: ncq_packet, up: Bool) -> [UInt8]? {
        guard let nat64 = self.nat64, let payload = packet.payload else { return nil }
        let copied = Int(packet.payload_length)
        let buffer = UnsafeBufferPointer(start: payload, count: copied)
        if up {
            guard nat64.goesThrough(buffer) else { return nil }
            return copied == Int(packet.length) ? Array(buffer) : []
        }
        guard nat64.comesBack(buffer) else { return nil }
        guard copied == Int(packet.length) else { return [] }
        return nat64.toIPv6(Array(buffer)) ?? []
    }

    /// A packet of NAT64 offered to the link as its IPv6 bytes.
    func admitTranslated(_ packet: ncq_packet, _ bytes: [UInt8], up: Bool, at now: Instant) {
        guard !bytes.isEmpty else {
            self.driver.summary.untranslated += 1
            self.queue.verdict(queue: packet.queue, id: packet.id, accept: false, mark: 0)
            return
        }
        let taken = bytes.withUnsafeBufferPointer { buffer -> Bool in
            let tcp = TCPHeader(buffer.baseAddress!, copied: buffer.count, length: buffer.count)
            var held = HeldPacket(packet, tcp: tcp)
            held.nat64 = up ? HeldPacket.translateOut : HeldPacket.translatedIn
            return self.driver.admit(
                held, up: up, wireLength: bytes.count, segments: 1, payload: buffer.baseAddress, copied: buffer.count,
                bytes: bytes, at: now)
        }
        if !taken {
            self.queue.verdict(queue: packet.queue, id: packet.id, accept: false, mark: 0)
            if let capture = self.capture, capture.wantsDrops {
                capture.write(bytes, length: UInt32(bytes.count), delivered: false, atMonotonic: ncq_now())
            }
        }
    }

    /// The link delivered a packet of NAT64: the original goes no further, its translation (or, for
    /// a server's answer, its IPv6 form) goes out; a copy the link made goes out once more.
    func deliverTranslated(_ delivery: PathDelivery<HeldPacket>, _ direction: Direction) {
        let packet = delivery.unit
        if !delivery.isCopy { self.queue.verdict(queue: packet.queue, id: packet.id, accept: false, mark: 0) }
        guard var bytes = packet.bytes else { return }
        // The capture shows what the device's radio carried: the IPv6 packet.
        if let capture = self.capture, !delivery.isCopy {
            capture.write(bytes, length: UInt32(bytes.count), delivered: true, atMonotonic: ncq_now())
        }
        if packet.nat64 == HeldPacket.translateOut {
            guard let translated = self.nat64?.toIPv4(bytes) else {
                self.driver.summary.untranslated += 1
                return
            }
            bytes = translated
        }
        if let offset = delivery.corruptByte, !delivery.isCopy { Self.corrupt(&bytes, offset: offset) }
        self.driver.delivered(delivery, direction, corrupted: delivery.corruptByte != nil && !delivery.isCopy)
        let length = UInt32(bytes.count)
        let result = bytes.withUnsafeBufferPointer { buffer in
            ncq_send_copy(bytes[0] >> 4 == 6 ? self.raw6 : self.raw4, buffer.baseAddress!, length)
        }
        if result != 0 { self.driver.summary.untranslated += 1 }
    }

    /// A reset the link sends to a server behind the NAT64 goes as the gateway would send it: IPv4,
    /// from the pool address of the cage's. One to the cage is IPv6 already.
    func translated(_ reset: ResetToSend) -> ResetToSend {
        guard reset.version == 6, let nat64 = self.nat64, let server = nat64.spec.embedded(reset.destination),
            let pool = self.nat64?.poolAddress(for: reset.source)
        else { return reset }
        var translated = reset
        translated.version = 4
        translated.source = pool
        translated.destination = server
        return translated
    }
}
