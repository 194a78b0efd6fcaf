#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusProtocol
import Foundation

/// Small pieces several commands share (`ping`, `replay`, and `bench`/`flood` in CheckoutBusLoad).

/// The exit status of a command stopped by SIGINT or SIGTERM before it finished (`flood`, `replay --loop`).
package enum ToolExit {
    package static let interrupted: Int32 = 130
}

extension String {
    /// A number with one decimal, without Foundation's formatter.
    package init(format2 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(abs(tenths % 10))"
    }

    package func padded(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}

extension String {
    /// A ratio with two decimals.
    package init(format2x value: Double) {
        let hundredths = Int((value * 100).rounded())
        let frac = abs(hundredths % 100)
        self = "\(hundredths / 100).\(frac < 10 ? "0" : "")\(frac)"
    }
}

/// A plain HTTP/1.1 GET to a daemon's `--metrics` address (`ping --healthz`, `flood --metrics`,
/// the benchmark's scraper): no outside package, a timeout on every read and write.
package enum HTTPProbe {
    /// A TCP connection to an IPv4 `HOST:PORT`, with `timeoutSeconds` on its reads and writes.
    /// - Throws: ``ToolError`` when the address is not one or the connection fails.
    package static func tcpConnect(_ address: String, timeoutSeconds: Int = 10) throws -> Int32 {
        var addr = sockaddr_in()
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]),
            inet_pton(AF_INET, String(address[..<colon]), &addr.sin_addr) == 1
        else { throw ToolError("not an IPv4 HOST:PORT: \(address)") }
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ToolError("socket: \(String(cString: strerror(errno)))") }
        // The send timeout bounds connect(2) too.
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        guard setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0,
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0,
            withUnsafePointer(to: &addr, {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }) == 0
        else {
            close(fd)
            throw ToolError("cannot connect to \(address)")
        }
        return fd
    }

    /// One HTTP/1.1 GET over a fresh TCP connection to an IPv4 `HOST:PORT`, read to the end.
    /// - Returns: the status code and body.
    /// - Throws: ``ToolError`` when it cannot connect or the answer is not HTTP.
    package static func get(_ address: String, _ path: String, timeoutSeconds: Int = 10) throws -> (status: Int, body: String) {
        let fd = try HTTPProbe.tcpConnect(address, timeoutSeconds: timeoutSeconds)
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(address)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response.append(contentsOf: buffer[0..<n])
        }
        let text = String(decoding: response, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 "), let status = Int(text.dropFirst(9).prefix(3)) else {
            throw ToolError("not an HTTP response from \(address)")
        }
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, body)
    }
}

/// How each SDK spells the lifecycle's callbacks in the raw families the flood generator draws from
/// and `replay --rewrite-ids` writes (docs/raw-shapes.md cites each SDK's source).
package enum RawSpellings {
    package struct Spelling: Sendable {
        package let platform: String
        package let names: [String]  // start, update, complete, fail, dismiss
        package func name(_ k: LifecycleKind) -> String { names[Int(k.rawValue)] }
    }

    package static let callbackSpellings: [Spelling] = [
        Spelling(platform: "ios", names: ["checkoutDidStart", "checkoutDidUpdate", "checkoutDidComplete", "checkoutDidFail", "checkoutDidDismiss"]),
        Spelling(platform: "ios", names: ["onStart", "onUpdate", "onComplete", "onFail", "onDismiss"]),
        Spelling(platform: "android", names: ["onCheckoutStarted", "onCheckoutUpdated", "onCheckoutCompleted", "onCheckoutFailed", "onCheckoutDismissed"]),
        Spelling(platform: "android", names: ["onStart", "onUpdate", "onComplete", "onFail", "onDismiss"]),
        Spelling(platform: "react_native", names: ["onStart", "onUpdate", "onComplete", "onFail", "onDismiss"]),
        Spelling(platform: "react_native", names: ["start", "update", "completed", "error", "close"]),
        Spelling(platform: "ios", names: ["start", "update", "complete", "fail", "checkoutDidCancel"]),
        Spelling(platform: "android", names: ["start", "update", "complete", "fail", "onCheckoutCanceled"]),
    ]

    package static let primerNames: [String: (complete: String, fail: String, dismiss: String)] = [
        "ios": ("primerDidCompleteCheckoutWithData", "primerDidFailWithError", "primerDidDismiss"),
        "android": ("onCheckoutCompleted", "onFailed", "onDismissed"),
        "react_native": ("success", "failure", "dismissed"),
    ]
}
