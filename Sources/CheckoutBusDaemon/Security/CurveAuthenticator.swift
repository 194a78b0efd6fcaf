#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import ZeroMQ
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The ZAP handler (RFC 27): answers libzmq's authentication requests for CURVE connections, on
/// `inproc://zeromq.zap.01`, polled by the pipeline thread.
///
/// Not `Sendable`: its REP socket lives on the pipeline thread.
package final class CurveAuthenticator {
    package let socket: ZMQSocket
    package let allowlists: CurveAllowlists
    package let logger: BusLogger
    private(set) var accepted: UInt64 = 0
    private(set) var refused: UInt64 = 0

    package init(context: ZMQContext, allowlists: CurveAllowlists, logger: BusLogger) throws {
        socket = try ZMQSocket(context: context, type: .rep)
        try socket.setLinger(milliseconds: 0)
        try socket.bind("inproc://zeromq.zap.01")
        self.allowlists = allowlists
        self.logger = logger
    }

    /// Answers every queued request.
    package func serve() throws {
        while let frames = try socket.receiveMultipart(dontWait: true) {
            // version, request id, domain, address, identity, mechanism, credentials…
            guard frames.count >= 6 else {
                _ = try socket.sendMultipart([Array("1.0".utf8), [], Array("400".utf8), Array("malformed".utf8), [], []])
                continue
            }
            let requestID = frames[1]
            let domain = String(decoding: frames[2], as: UTF8.self)
            let address = String(decoding: frames[3], as: UTF8.self)
            let mechanism = String(decoding: frames[5], as: UTF8.self)
            var key = ""
            if mechanism == "CURVE", frames.count >= 7, let k = ZMQCurveKeyPair.z85(frames[6]) { key = k }
            let ok = !key.isEmpty && allowlists.allows(domain: domain, key: key)
            if ok {
                accepted += 1
                logger.debug("curve: accepted", ["domain": domain, "key": key, "address": address])
            } else {
                refused += 1
                logger.warning("curve: refused", ["domain": domain, "key": key.isEmpty ? "-" : key, "address": address,
                                                  "mechanism": mechanism])
            }
            _ = try socket.sendMultipart([
                Array("1.0".utf8), requestID, Array((ok ? "200" : "400").utf8),
                Array((ok ? "OK" : "key not allowed for \(domain)").utf8), Array((ok ? key : "").utf8), [],
            ])
        }
    }
}
