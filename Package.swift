// swift-tools-version:6.0
import PackageDescription

/// One settings list for every Swift target: Swift 6 mode, explicit existentials, explicit imports.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// Release builds of the pipeline's modules skip the runtime exclusivity checks (see the targets).
let hotPathSettings: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "CheckoutBus",
    products: [
        .executable(name: "checkoutbusd", targets: ["checkoutbusd"]),
        .executable(name: "checkoutbus", targets: ["checkoutbus"]),
        .executable(name: "checkoutbus-fulfil", targets: ["checkoutbus-fulfil"]),
        .executable(name: "checkoutbus-analytics", targets: ["checkoutbus-analytics"]),
        .executable(name: "checkoutbus-jetstream", targets: ["checkoutbus-jetstream"]),
        .library(name: "CheckoutBus", targets: ["CheckoutBus"]),
        .library(name: "CheckoutBusCore", targets: ["CheckoutBusCore"]),
        .library(name: "CheckoutBusWorkers", targets: ["CheckoutBusWorkers"]),
    ],
    targets: [
        // libzmq from Debian (headers and library on the default paths). No `pkgConfig: "libzmq"`:
        // Debian's libzmq.pc pulls in `-isystem` flags through Requires.private that SwiftPM refuses
        // with a warning on every build, and the package builds free of warnings.
        .systemLibrary(
            name: "CZeroMQ",
            providers: [.apt(["libzmq3-dev"])]
        ),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"], swiftSettings: swiftSettings),
        // SQLite from Debian, for the fulfilment worker's order store; `SQLite` is its one Swift owner.
        .systemLibrary(
            name: "CSQLite",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(name: "SQLite", dependencies: ["CSQLite"], swiftSettings: swiftSettings),
        // The NATS C client from Debian (libnats-dev), for the JetStream bridge; `NATS` is its one
        // Swift owner. No `pkgConfig`, as for libzmq: headers and library sit on the default paths.
        .systemLibrary(
            name: "CNATS",
            providers: [.apt(["libnats-dev"])]
        ),
        .target(name: "NATS", dependencies: ["CNATS"], swiftSettings: swiftSettings),
        // A cache prefetch hint for the pipeline's table probes (Swift has none): two inline C
        // functions, no library.
        .target(name: "CPrefetch"),
        // `O_DIRECT` for the journal's writes, which Glibc's Swift module does not export: one C function.
        .target(name: "CFileIO"),
        .target(
            name: "CheckoutBusCore",
            dependencies: ["CPrefetch"],
            // The hot path's classes (the JSON tape, the state table) are read millions of times a
            // second; release builds drop the runtime exclusivity checks on their stored properties
            // (about a fifth of the pipeline's time under a flood). Debug builds — and so
            // `swift test` — keep every check.
            swiftSettings: swiftSettings + hotPathSettings
        ),
        // The daemon's loop and journal touch their own stored properties several times per event
        // (the pending batch, the arrival times): the same release-only setting (about 460
        // instructions per event).
        .target(name: "CheckoutBus", dependencies: ["CheckoutBusCore", "ZeroMQ", "CFileIO"], swiftSettings: swiftSettings + hotPathSettings),
        .target(name: "CheckoutBusWorkers", dependencies: ["CheckoutBus", "SQLite"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbusd", dependencies: ["CheckoutBus"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus-fulfil", dependencies: ["CheckoutBusWorkers"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus-analytics", dependencies: ["CheckoutBusWorkers"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus", dependencies: ["CheckoutBus"], swiftSettings: swiftSettings),
        .target(name: "CheckoutBusJetStream", dependencies: ["CheckoutBus", "NATS"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus-jetstream", dependencies: ["CheckoutBusJetStream"], swiftSettings: swiftSettings),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"], swiftSettings: swiftSettings),
        .testTarget(name: "CheckoutBusCoreTests", dependencies: ["CheckoutBusCore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "IntegrationTests",
            // Depends on the executables so `swift test` builds them; the tests run them as processes.
            dependencies: [
                "CheckoutBus", "CheckoutBusCore", "ZeroMQ", "SQLite", "checkoutbusd", "checkoutbus", "checkoutbus-fulfil",
                "checkoutbus-analytics", "checkoutbus-jetstream", "CheckoutBusJetStream",
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
