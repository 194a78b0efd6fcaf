// swift-tools-version:6.0
import PackageDescription

/// One settings list for every Swift target: Swift 6 mode, explicit existentials, explicit imports.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// Release builds of the pipeline's modules skip the runtime exclusivity checks (see the targets). Never on a
/// target the client product contains: a package that uses `unsafeFlags` cannot be depended on by version.
let hotPathSettings: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "CheckoutBus",
    products: [
        .executable(name: "checkoutbusd", targets: ["checkoutbusd"]),
        .executable(name: "checkoutbus", targets: ["checkoutbus"]),
        .executable(name: "checkoutbus-fulfil", targets: ["checkoutbus-fulfil"]),
        .executable(name: "checkoutbus-analytics", targets: ["checkoutbus-analytics"]),
        .executable(name: "checkoutbus-jetstream", targets: ["checkoutbus-jetstream"]),
        // What an app imports: subscribing with recovery, cursors, acknowledged sending, CURVE client keys.
        .library(name: "CheckoutBusClient", targets: ["CheckoutBusClient"]),
    ],
    targets: [
        // libzmq from Debian (headers and library on the default paths). No `pkgConfig: "libzmq"`:
        // Debian's libzmq.pc pulls in `-isystem` flags through Requires.private that SwiftPM refuses
        // with a warning on every build, and the package builds free of warnings.
        .systemLibrary(name: "CZeroMQ", providers: [.apt(["libzmq3-dev"])]),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"], swiftSettings: swiftSettings),
        // SQLite from Debian, for the fulfilment worker's order store; `SQLite` is its one Swift owner.
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "SQLite", dependencies: ["CSQLite"], swiftSettings: swiftSettings),
        // The NATS C client from Debian (libnats-dev), for the JetStream bridge; `NATS` is its one
        // Swift owner. No `pkgConfig`, as for libzmq: headers and library sit on the default paths.
        .systemLibrary(name: "CNATS", providers: [.apt(["libnats-dev"])]),
        .target(name: "NATS", dependencies: ["CNATS"], swiftSettings: swiftSettings),
        // jemalloc from Debian, linked into checkoutbusd alone (Sources/checkoutbusd/Jemalloc.swift):
        // one cache per thread instead of an arena lock the pipeline and ZeroMQ's I/O thread take
        // in turn on every message. The module declares only `mallctl`.
        .systemLibrary(name: "CJemalloc", providers: [.apt(["libjemalloc-dev"])]),
        // A cache prefetch hint for the pipeline's table probes (Swift has none): two inline C
        // functions, no library.
        .target(name: "CPrefetch"),
        // `O_DIRECT` for the journal's writes, which Glibc's Swift module does not export: one C function.
        .target(name: "CFileIO"),

        // The process around the libraries: a logger, signals, flags, clocks, atomic files.
        .target(name: "CheckoutBusRuntime", swiftSettings: swiftSettings, plugins: ["BuildRevision"]),
        // The git commit the package was built from, for --version and checkoutbus_build_info.
        .plugin(name: "BuildRevision", capability: .buildTool()),
        // JSON without Foundation: the tape reader and the writer, for both sides of every socket.
        // Its hot class marks its fields `@exclusivity(unchecked)` instead of taking unsafe flags.
        .target(name: "CheckoutBusJSON", dependencies: ["CPrefetch"], swiftSettings: swiftSettings),
        // What both sides of a socket agree on: kinds (defined once), topics, stable codes, heartbeats,
        // control messages.
        .target(name: "CheckoutBusProtocol", dependencies: ["CheckoutBusJSON"], swiftSettings: swiftSettings),
        // Decoding raw shapes, normalising, the lifecycle rules, the envelope: pure, no I/O. The hot
        // path's classes (the state table) are read millions of times a second; release builds drop
        // the runtime exclusivity checks (about a fifth of the pipeline's time under a flood). Debug
        // builds — and so `swift test` — keep every check.
        .target(
            name: "CheckoutBusCore",
            dependencies: ["CheckoutBusProtocol", "CheckoutBusJSON", "CPrefetch"],
            swiftSettings: swiftSettings + hotPathSettings
        ),
        // What an app imports. ZeroMQ and the protocol only; no daemon code, no unsafe flags.
        .target(
            name: "CheckoutBusClient",
            dependencies: ["ZeroMQ", "CheckoutBusProtocol", "CheckoutBusJSON", "CheckoutBusRuntime"],
            swiftSettings: swiftSettings
        ),
        // The daemon: sockets and the loop, the journal, control, metrics, security. Its loop and
        // journal touch their own stored properties several times per event (the pending batch, the
        // arrival times): the same release-only setting as the core (about 460 instructions per event).
        .target(
            name: "CheckoutBusDaemon",
            dependencies: ["CheckoutBusCore", "CheckoutBusProtocol", "CheckoutBusJSON", "CheckoutBusRuntime", "ZeroMQ", "CFileIO"],
            swiftSettings: swiftSettings + hotPathSettings
        ),
        // The `checkoutbus` commands: send, tail, replay, stats, decode, flood, bench, route, keygen,
        // subscribers, cursor (which reads and moves the workers' positions in their stores).
        .target(
            name: "CheckoutBusTools",
            dependencies: ["CheckoutBusDaemon", "CheckoutBusClient", "CheckoutBusCore", "CheckoutBusProtocol",
                           "CheckoutBusJSON", "CheckoutBusRuntime", "ZeroMQ", "CheckoutBusWorkers"],
            swiftSettings: swiftSettings
        ),
        // Benchmarks and load generation (`bench`, `flood`): built on the tools, apart from them.
        .target(
            name: "CheckoutBusLoad",
            dependencies: ["CheckoutBusTools", "CheckoutBusDaemon", "CheckoutBusClient", "CheckoutBusCore",
                           "CheckoutBusProtocol", "CheckoutBusJSON", "CheckoutBusRuntime", "ZeroMQ"],
            swiftSettings: swiftSettings
        ),
        // Workers and the bridge depend on the client, never on the daemon.
        .target(
            name: "CheckoutBusWorkers",
            dependencies: ["CheckoutBusClient", "CheckoutBusProtocol", "CheckoutBusJSON", "CheckoutBusRuntime", "SQLite"], swiftSettings: swiftSettings),
        .target(
            name: "CheckoutBusJetStream",
            dependencies: ["CheckoutBusClient", "CheckoutBusProtocol", "CheckoutBusJSON", "CheckoutBusRuntime", "NATS"], swiftSettings: swiftSettings),

        .executableTarget(
            name: "checkoutbusd", dependencies: ["CheckoutBusDaemon", "CheckoutBusRuntime", "CJemalloc"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus", dependencies: ["CheckoutBusTools", "CheckoutBusLoad", "CheckoutBusRuntime"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus-fulfil", dependencies: ["CheckoutBusWorkers", "CheckoutBusClient", "CheckoutBusRuntime"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus-analytics", dependencies: ["CheckoutBusWorkers", "CheckoutBusClient", "CheckoutBusRuntime"], swiftSettings: swiftSettings),
        .executableTarget(name: "checkoutbus-jetstream", dependencies: ["CheckoutBusJetStream", "CheckoutBusClient", "CheckoutBusRuntime"], swiftSettings: swiftSettings),
        // A test fixture, not a product: the async Subscriber as a process the integration tests kill -9.
        .executableTarget(name: "async-seq-recorder", dependencies: ["CheckoutBusClient"], swiftSettings: swiftSettings),

        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"], swiftSettings: swiftSettings),
        // The client's logic without sockets: the subscription's gap logic fed by hand.
        .testTarget(name: "CheckoutBusClientTests", dependencies: ["CheckoutBusClient", "CheckoutBusProtocol", "CheckoutBusJSON"], swiftSettings: swiftSettings),
        .testTarget(
            name: "CheckoutBusCoreTests", dependencies: ["CheckoutBusCore", "CheckoutBusProtocol", "CheckoutBusJSON"], swiftSettings: swiftSettings),
        .testTarget(name: "NATSTests", dependencies: ["NATS"], swiftSettings: swiftSettings),
        .testTarget(
            name: "CheckoutBusWorkersTests",
            dependencies: ["CheckoutBusWorkers", "CheckoutBusClient", "CheckoutBusProtocol", "CheckoutBusRuntime", "SQLite"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CheckoutBusJetStreamTests", dependencies: ["CheckoutBusJetStream", "CheckoutBusRuntime"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "SQLiteTests", dependencies: ["SQLite"], swiftSettings: swiftSettings),
        .testTarget(name: "CheckoutBusRuntimeTests", dependencies: ["CheckoutBusRuntime"], swiftSettings: swiftSettings),
        .testTarget(name: "CheckoutBusJSONTests", dependencies: ["CheckoutBusJSON"], swiftSettings: swiftSettings),
        .testTarget(
            name: "CheckoutBusProtocolTests", dependencies: ["CheckoutBusProtocol", "CheckoutBusJSON", "CheckoutBusCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CheckoutBusLoadTests",
            dependencies: ["CheckoutBusLoad", "CheckoutBusTools", "CheckoutBusCore", "CheckoutBusProtocol", "CheckoutBusJSON"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CheckoutBusToolsTests", dependencies: ["CheckoutBusTools", "CheckoutBusCore", "CheckoutBusProtocol", "CheckoutBusJSON"], swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CheckoutBusDaemonTests", dependencies: ["CheckoutBusDaemon", "CheckoutBusCore", "CheckoutBusRuntime"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            // Depends on the executables so `swift test` builds them; the tests run them as processes.
            dependencies: [
                "CheckoutBusClient", "CheckoutBusCore", "CheckoutBusDaemon", "CheckoutBusTools", "CheckoutBusLoad", "CheckoutBusProtocol",
                "CheckoutBusJSON", "CheckoutBusRuntime", "ZeroMQ", "SQLite",
                "checkoutbusd", "checkoutbus", "checkoutbus-fulfil", "checkoutbus-analytics", "checkoutbus-jetstream",
                "async-seq-recorder", "CheckoutBusJetStream", "CheckoutBusWorkers",
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
