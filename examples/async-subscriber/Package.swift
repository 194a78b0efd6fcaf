// swift-tools-version:6.0
// The README's async subscriber as a package of its own: it depends on CheckoutBus by path and
// imports only the CheckoutBusClient product, so its build compiles no daemon code.
import PackageDescription

let package = Package(
    name: "async-subscriber",
    dependencies: [.package(name: "CheckoutBus", path: "../..")],
    targets: [
        .executableTarget(
            name: "async-subscriber",
            dependencies: [.product(name: "CheckoutBusClient", package: "CheckoutBus")]
        )
    ]
)
