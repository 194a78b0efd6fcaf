#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusRuntime

/// The terminal while `checkoutbus top` owns it: the alternate screen with the cursor hidden, and
/// stdin in raw mode (no echo, no line buffering; signals still raised by Ctrl-C) so single keys
/// arrive. ``restore()`` puts everything back; it is also run on SIGINT and SIGTERM, since those
/// end `top` through its stop signal and its loop then returns through a `defer`.
///
/// Not `Sendable`; lives on the thread that runs `top`.
final class TerminalScreen {
    private var saved: termios?
    private var restored = false

    init() {
        if isatty(0) == 1 {
            var t = termios()
            if tcgetattr(0, &t) == 0 {
                saved = t
                t.c_lflag &= ~tcflag_t(ICANON | ECHO)
                t.c_cc.6 = 1  // VMIN
                t.c_cc.5 = 0  // VTIME
                tcsetattr(0, TCSANOW, &t)
            }
        }
        // Alternate screen, cursor hidden, cleared.
        FileHandleWriter.standardOutput("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    /// Replaces the screen's content with `lines`, from the top left.
    func draw(_ lines: [String]) {
        FileHandleWriter.standardOutput("\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
    }

    /// One key pressed within `timeoutMilliseconds`, or nil.
    func readKey(timeoutMilliseconds: Int) -> UInt8? {
        guard saved != nil else {
            usleep(UInt32(timeoutMilliseconds) * 1000)
            return nil
        }
        var pfd = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeoutMilliseconds)) > 0 else { return nil }
        var byte: UInt8 = 0
        guard read(0, &byte, 1) == 1 else {
            // stdin closed (EOF): no more keys; wait out the time instead of spinning.
            usleep(UInt32(timeoutMilliseconds) * 1000)
            return nil
        }
        return byte
    }

    /// Leaves the alternate screen, shows the cursor and puts stdin back as it was. Idempotent.
    func restore() {
        guard !restored else { return }
        restored = true
        FileHandleWriter.standardOutput("\u{1B}[?25h\u{1B}[?1049l")
        if var t = saved { tcsetattr(0, TCSANOW, &t) }
    }

    deinit { restore() }

    /// The terminal's size on stdout (80×24 when it cannot be read).
    static func size() -> (columns: Int, rows: Int) {
        var w = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &w) == 0, w.ws_col > 0, w.ws_row > 0 else { return (80, 24) }
        return (Int(w.ws_col), Int(w.ws_row))
    }
}
