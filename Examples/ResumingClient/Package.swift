// swift-tools-version:6.0
// An example of testing a Swift HTTP client under netcond's conditions with NetcondTesting: a
// downloader that resumes with Range after a drop, tested through `@Test(.network(.lte))`.
import PackageDescription

let package = Package(
    name: "ResumingClient",
    platforms: [.macOS(.v14)],
    dependencies: [
        // In your own package: .package(url: "<where netcond's source lives>", branch: "main")
        .package(name: "netcond", path: "../.."),
    ],
    targets: [
        .target(name: "ResumingClient"),
        .testTarget(
            name: "ResumingClientTests",
            dependencies: ["ResumingClient", .product(name: "NetcondTesting", package: "netcond")]
        ),
    ]
)
