// Parses bench/snapshot-1k.json N times with simdjson's DOM API (the way a C API shim would) and
// walks every value, to compare with CheckoutBus's Swift tape scanner on the same document.
// Build and run: bench/compare-parsers
#include <simdjson.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <string>

static uint64_t walk(simdjson::dom::element e) {
    uint64_t n = 1;
    switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
        for (auto field : simdjson::dom::object(e)) { n += field.key.size() + walk(field.value); }
        break;
    case simdjson::dom::element_type::ARRAY:
        for (auto v : simdjson::dom::array(e)) { n += walk(v); }
        break;
    default: break;
    }
    return n;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "bench/snapshot-1k.json";
    long iterations = argc > 2 ? std::stol(argv[2]) : 1000000;
    simdjson::padded_string json = simdjson::padded_string::load(path);
    simdjson::dom::parser parser;
    uint64_t sink = 0;
    for (int mode = 0; mode < 2; ++mode) {
        auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < iterations; ++i) {
            simdjson::dom::element doc = parser.parse(json);
            sink += mode == 0 ? (uint64_t)doc.type() : walk(doc);
        }
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("simdjson %-12s %zu bytes: %.0f docs/s (%.1f MB/s)\n", mode == 0 ? "parse" : "parse+walk",
                    json.size(), iterations / s, iterations * json.size() / s / 1e6);
    }
    return sink == 42 ? 1 : 0;
}
