import Foundation
import NetcondFuzzTargets

// Two builds of one program. Built by `scripts/fuzz` (-DNETCOND_FUZZING, -sanitize=fuzzer): libFuzzer's
// entry point, the target named by NETCOND_FUZZ_TARGET. Built plainly: `netcond-fuzz TARGET FILE...`
// runs each file through the target once (a crash found, replayed), and lists the targets without one.

#if NETCOND_FUZZING
nonisolated(unsafe) var chosen: (@Sendable ([UInt8]) -> Void)?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if chosen == nil {
        let name = ProcessInfo.processInfo.environment["NETCOND_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTargets.named(name) else {
            FileHandle.standardError.write(
                Data(
                    "netcond-fuzz: NETCOND_FUZZ_TARGET '\(name)' is not a target; allowed: \(FuzzTargets.all.map(\.name).joined(separator: ", "))\n"
                        .utf8))
            exit(2)
        }
        chosen = target
    }
    chosen!(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func runDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// SwiftPM links an executable's entry point as `<module>_main` (`main` is made an alias of it),
/// so libFuzzer's own `main` is not the one that runs: this one hands over to libFuzzer's driver.
@_cdecl("netcond_fuzz_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var vector = argv
    return runDriver(&count, &vector) { data, size in fuzzOne(data, size) }
}
#else
@main
enum Replay {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTargets.named(name) else {
            print(
                "usage: netcond-fuzz TARGET FILE...   targets: \(FuzzTargets.all.map(\.name).joined(separator: ", "))")
            exit(arguments.isEmpty ? 0 : 2)
        }
        for file in arguments.dropFirst() {
            guard let data = FileManager.default.contents(atPath: file) else {
                print("netcond-fuzz: cannot read \(file)")
                exit(2)
            }
            target(Array(data))
            print("ok: \(file)")
        }
    }
}
#endif
