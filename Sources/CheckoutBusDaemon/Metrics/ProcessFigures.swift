#if canImport(Glibc)
import Glibc
#endif

/// The `process_*` figures Prometheus's client libraries export, read from `/proc/self` on the
/// metrics thread for each page. A figure that cannot be read is left out of the page (nil), never
/// shown as 0. `Sendable`: a value.
package struct ProcessFigures: Sendable {
    /// User and system CPU time, in seconds.
    package var cpuSeconds: Double?
    package var residentBytes: Int64?
    package var virtualBytes: Int64?
    package var openDescriptors: Int64?
    package var maxDescriptors: Int64?
    /// When the process started, in seconds since the Unix epoch.
    package var startTimeSeconds: Double?

    /// Reads them now.
    package static func read() -> ProcessFigures {
        var f = ProcessFigures()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Int64(sysconf(Int32(_SC_PAGESIZE)))
        // /proc/self/stat: fields after the command's closing parenthesis (which may hold spaces).
        if let stat = file("/proc/self/stat"), let close = stat.lastIndex(of: UInt8(ascii: ")")), ticks > 0 {
            let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            // fields[0] is field 3 (state): utime is field 14, stime 15, starttime 22, vsize 23.
            if fields.count > 20, let utime = Double(fields[11]), let stime = Double(fields[12]) {
                f.cpuSeconds = (utime + stime) / ticks
                if let vsize = Int64(fields[20]) { f.virtualBytes = vsize }
                if let start = Double(fields[19]), let boot = bootTime() { f.startTimeSeconds = boot + start / ticks }
            }
        }
        if let statm = file("/proc/self/statm") {
            let parts = statm.split(separator: UInt8(ascii: " "))
            if parts.count > 1, let pages = Int64(String(decoding: parts[1], as: UTF8.self)), page > 0 { f.residentBytes = pages * page }
        }
        if let dir = opendir("/proc/self/fd") {
            var n: Int64 = 0
            var failed = false
            while true {
                errno = 0
                guard let entry = readdir(dir) else {
                    failed = errno != 0  // nil with errno set: a read error, not the end
                    break
                }
                if entry.pointee.d_name.0 != UInt8(ascii: ".") { n += 1 }
            }
            if closedir(dir) != 0 { failed = true }
            if !failed { f.openDescriptors = n - 1 }  // less the directory's own descriptor
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { f.maxDescriptors = Int64(clamping: limit.rlim_cur) }
        return f
    }

    /// The system's boot time (`btime` of /proc/stat), in seconds since the epoch.
    private static func bootTime() -> Double? {
        guard let text = file("/proc/stat") else { return nil }
        for line in text.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("btime ".utf8)) {
            return Double(String(decoding: line.dropFirst(6), as: UTF8.self).trimmingCharacters(in: " "))
        }
        return nil
    }

    /// A small /proc file's bytes, or nil when it cannot be read.
    private static func file(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer {
            // A read-only /proc descriptor: a failed close loses nothing already read.
            if close(fd) != 0 { _ = errno }
        }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if n == 0 { break }
            out += chunk[..<n]
            if out.count > 1 << 20 { return nil }
        }
        return out
    }

    /// The Prometheus text of the figures read.
    package func write(to out: inout String) {
        func line(_ name: String, _ type: String, _ help: String, _ value: String?) {
            guard let value else { return }
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        line("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpuSeconds.map { "\($0)" })
        line("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", residentBytes.map { "\($0)" })
        line("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", virtualBytes.map { "\($0)" })
        line("process_open_fds", "gauge", "Number of open file descriptors.", openDescriptors.map { "\($0)" })
        line("process_max_fds", "gauge", "Maximum number of open file descriptors.", maxDescriptors.map { "\($0)" })
        line("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
             startTimeSeconds.map { "\($0)" })
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var s = Substring(self)
        while s.first == set { s = s.dropFirst() }
        while s.last == set { s = s.dropLast() }
        return String(s)
    }
}
