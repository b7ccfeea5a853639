// swift-tools-version:6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let package = Package(
    name: "netcond",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "netcond", targets: ["netcond"]),
        .library(name: "NetcondTesting", targets: ["NetcondTesting"]),
        .library(name: "NetcondTLS", targets: ["NetcondTLS"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // `swift package generate-documentation --target NetcondTesting` (DocC; the tests build it).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        .target(
            name: "NetcondCore",
            dependencies: [
                .product(name: "Yams", package: "Yams"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NetcondOrigin",
            dependencies: [
                "NetcondCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NetcondProxy",
            dependencies: [
                "CNetcondSystem",
                "NetcondCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        // The TLS library (two copies of BoringSSL, most of a cold build) lives here alone, so
        // that NetcondTesting builds without it; the netcond command always links it.
        .target(
            name: "NetcondTLS",
            dependencies: [
                "NetcondProxy",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(name: "CNetcondSystem"),
        .target(name: "CNetcondPacket"),
        .target(
            name: "NetcondPacket",
            dependencies: [
                "CNetcondPacket",
                "NetcondCore",
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NetcondScenario",
            dependencies: [
                "CNetcondSystem",
                "NetcondCore",
                "NetcondProxy",
                "NetcondOrigin",
                "NetcondPacket",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NetcondTesting",
            dependencies: [
                "NetcondCore",
                "NetcondProxy",
                "NetcondOrigin",
                "NetcondScenario",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "netcond-revision",
            swiftSettings: swiftSettings
        ),
        .plugin(
            name: "NetcondRevision",
            capability: .buildTool(),
            dependencies: ["netcond-revision"]
        ),
        .executableTarget(
            name: "netcond",
            dependencies: [
                "NetcondCore",
                "NetcondProxy",
                "NetcondOrigin",
                "NetcondScenario",
                "NetcondPacket",
                "NetcondTLS",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["NetcondRevision"]
        ),
        .target(
            name: "NetcondFuzzTargets",
            dependencies: [
                "NetcondCore",
                "NetcondPacket",
                "NetcondProxy",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "netcond-fuzz",
            dependencies: ["NetcondFuzzTargets"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NetcondTestingTests",
            dependencies: ["NetcondTesting", "NetcondTLS"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NetcondFuzzTests",
            dependencies: ["NetcondFuzzTargets"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NetcondCoreTests",
            dependencies: ["NetcondCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NetcondScenarioTests",
            dependencies: [
                "NetcondScenario", "NetcondProxy", "NetcondCore", "NetcondPacket",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NetcondPacketTests",
            dependencies: ["NetcondPacket", "CNetcondPacket", "NetcondCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NetcondOriginTests",
            dependencies: [
                "NetcondOrigin",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NetcondProxyTests",
            dependencies: [
                "NetcondProxy",
                "NetcondOrigin",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
