import NetcondCore

/// What an IPv6-only run saw of a client asking for IPv4, as attempts that reached no server; and
/// what a run's addressing refuses of a profile switched to.
extension PacketSession {
    /// Why a run on `run`'s profile cannot switch to `profile` (nil: it can). The addressing holds
    /// for the whole run (the cage refuses IPv4 from its first command on, the hosts file and the
    /// resolver are the run's), and the captive portal catches IPv4 and `::1` connections, not
    /// NAT64's: switching into or out of `ipv6_only`, or to a portal on an IPv6-only run, would
    /// judge a client on a network the run is not.
    static func addressingProblem(run: Profile, switchingTo profile: Profile) -> String? {
        if (run.ipv6Only == nil) != (profile.ipv6Only == nil) {
            return
                "profile \(profile.name) \(profile.ipv6Only == nil ? "has IPv4" : "is ipv6_only") and the run's profile "
                + "\(run.name) \(run.ipv6Only == nil ? "has IPv4" : "is ipv6_only"): a run's addressing holds from its start "
                + "to its end; allowed: profiles that agree on ipv6_only"
        }
        if run.ipv6Only != nil, profile.captivePortal != nil {
            return "profile \(profile.name) has a captive portal, which an IPv6-only run does not build yet"
        }
        return nil
    }

    /// Since `clientStart` (CLOCK_MONOTONIC nanoseconds): each lookup of one of the run's names that
    /// asked for its IPv4 address alone (DNS64 gives none), and each connect or send to one of
    /// their IPv4 addresses (no route), as the cage's BPF program noted them (its last 32).
    func ipv4Attempts(since clientStart: Int64) -> [RunEvidence.FailedConnect] {
        guard self.profile.ipv6Only != nil else { return [] }
        let seconds = { (at: Int64) in Double(at - clientStart) / 1e9 }
        var attempts = self.naming.names.ipv4OnlyAsks().filter { $0.at >= clientStart }.map {
            RunEvidence.FailedConnect(at: seconds($0.at), host: $0.name, port: 0, outcome: .noIPv4Address)
        }
        var names: [String: String] = [:]
        for (name, address) in [(Session.originHost, self.originAddress.ipAddress ?? "")] + self.knownNames() {
            names[address] = names[address] ?? name
        }
        for refusal in self.engine.cage.ipv4Refusals().recent where refusal.at >= clientStart {
            // Only the run's own servers: a refusal elsewhere says nothing of how it reached them.
            guard let name = names[refusal.address] else { continue }
            attempts.append(
                RunEvidence.FailedConnect(
                    at: seconds(refusal.at), host: "\(name) (\(refusal.address))", port: refusal.port,
                    outcome: .noIPv4Route))
        }
        return attempts
    }
}
