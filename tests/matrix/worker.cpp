// The C++ worker of the cross-language matrix (scripts/test-matrix.sh describes the
// protocol every language's worker follows), on the C++ header (shoal.hpp). The golden
// vectors are checked with libxxhash's XXH3.
//
//   worker STORE LANG LANGS KEYS ADDS VECTORS
#include <xxhash.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shoal.hpp"

namespace {

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::seconds(180);

std::string le64(std::uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; i++) s[i] = static_cast<char>(v >> (8 * i));
    return s;
}

std::uint64_t unle64(const std::string& b) {
    if (b.size() != 8) throw Failure("a value of " + std::to_string(b.size()) + " bytes, not 8");
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | static_cast<unsigned char>(b[i]);
    return v;
}

int golden(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Failure(path + ": cannot open");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream f(line);
        std::string seed, key_hex, want[6];
        f >> seed >> key_hex;
        for (auto& w : want) f >> w;
        if (!f) throw Failure("golden vector line: " + line);
        std::string key;
        if (key_hex != "-")
            for (std::size_t i = 0; i + 1 < key_hex.size(); i += 2)
                key.push_back(static_cast<char>(std::stoul(key_hex.substr(i, 2), nullptr, 16)));
        std::uint64_t h = XXH3_64bits_withSeed(key.data(), key.size(), std::stoull(seed, nullptr, 0));
        std::uint64_t got[6] = {h, h >> 48, h >> 56, (((h >> 32) & 0xffff) * 59) >> 16, ((h >> 16) & 0xffff) % 4,
                                h & 15};
        const char* names[6] = {"hash", "tag", "cell tag", "home", "stash", "dir"};
        for (int i = 0; i < 6; i++)
            if (got[i] != std::stoull(want[i], nullptr, 0)) {
                std::ostringstream m;
                m << "golden vector " << n << " (key " << key_hex << "): " << names[i] << " 0x" << std::hex << got[i]
                  << ", want " << want[i];
                throw Failure(m.str());
            }
        n++;
    }
    if (n == 0) throw Failure(path + ": no vectors");
    return n;
}

template <class F>
std::string wait_for(Clock::time_point start, const std::string& what, F get) {
    for (;;) {
        std::optional<std::string> v = get();
        if (v) return *v;
        if (Clock::now() - start > kWait) throw Failure("timed out waiting for " + what);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

std::string var_value(const std::string& lang, std::uint64_t i) {
    return lang + ":" + std::to_string(i) + ":\xc3\xa9\xe2\x82\xac";
}

std::string fixed_key(const std::string& lang, std::uint64_t i) {
    std::string pad = lang.substr(0, 10);
    pad.resize(10, '.');
    char num[8];
    std::snprintf(num, sizeof num, "%06llu", static_cast<unsigned long long>(i));
    return pad + num;
}

shoal::DataType type(std::uint32_t code) { return shoal::DataType{code, 0}; }

int run(char** argv) {
    const std::string path = argv[1], lang = argv[2];
    std::vector<std::string> langs;
    std::istringstream ls(argv[3]);
    for (std::string l; std::getline(ls, l, ',');) langs.push_back(l);
    std::uint64_t id = langs.size();
    for (std::size_t i = 0; i < langs.size(); i++)
        if (langs[i] == lang) id = i;
    if (id == langs.size()) throw Failure(lang + " is not in " + argv[3]);
    const std::uint64_t keys = std::stoull(argv[4]), adds = std::stoull(argv[5]);
    const int vectors = golden(argv[6]);
    const auto start = Clock::now();

    shoal::Store store(path);
    shoal::MapOptions text;
    text.key_type = type(SHOAL_TYPE_UTF8);
    text.value_type = type(SHOAL_TYPE_UTF8);
    shoal::MapOptions counter;
    counter.key_type = type(SHOAL_TYPE_UTF8);
    counter.value_type = type(SHOAL_TYPE_I64);
    shoal::FixedOptions fixed_o;
    fixed_o.key_type = type(SHOAL_TYPE_BYTES);
    fixed_o.value_type = type(SHOAL_TYPE_F64);
    shoal::FixedOptions ints;
    ints.key_type = type(SHOAL_TYPE_U64);
    ints.value_type = type(SHOAL_TYPE_I64);
    auto sync = store.map("mx_sync", true, text);
    auto var = store.map("mx_var", true, text);
    auto fixed = store.fixed_map("mx_fixed", 16, 8, true, fixed_o);
    auto inl = store.fixed_map("mx_inline", 8, 8, true, ints);
    auto count_fixed = store.fixed_map("mx_count_fixed", 8, 8, true, ints);
    auto count_var = store.map("mx_count_var", true, counter);
    if (var.value_type() != type(SHOAL_TYPE_UTF8) || inl.key_type() != type(SHOAL_TYPE_U64))
        throw Failure("recorded types differ from the protocol's");

    sync.put("ready/" + lang, "1");
    for (const auto& l : langs) {
        std::string k = "ready/" + l;
        wait_for(start, l + " to start (" + k + ")", [&] { return sync.get(k); });
    }

    for (std::uint64_t i = 0; i < keys; i++) {
        var.put(lang + "/" + std::to_string(i), var_value(lang, i));
        double d = static_cast<double>(id * 1000 + i) + 0.25;
        std::uint64_t bits;
        std::memcpy(&bits, &d, 8);
        fixed.put(fixed_key(lang, i), le64(bits));
        inl.put(le64((id + 1) << 32 | i), le64(static_cast<std::uint64_t>(-static_cast<std::int64_t>(id * 1000 + i) - 1)));
    }
    for (std::uint64_t r = 0; r < adds; r++) {
        count_fixed.add(le64(r % 4), 1);
        count_var.add(std::string("total"), 1);
    }
    sync.put("done/" + lang, "1");

    std::uint64_t checked = 0;
    for (std::uint64_t o = 0; o < langs.size(); o++) {
        const std::string& other = langs[o];
        for (std::uint64_t i = 0; i < keys; i++) {
            std::string k = other + "/" + std::to_string(i);
            std::string v = wait_for(start, other + "'s key \"" + k + "\" in mx_var", [&] { return var.get(k); });
            if (v != var_value(other, i))
                throw Failure(other + "'s key \"" + k + "\" in mx_var: \"" + v + "\", want \"" + var_value(other, i) + "\"");
            std::string fk = fixed_key(other, i);
            std::string fv = wait_for(start, other + "'s key \"" + fk + "\" in mx_fixed", [&] { return fixed.get(fk); });
            std::uint64_t bits = unle64(fv);
            double got, want = static_cast<double>(o * 1000 + i) + 0.25;
            std::memcpy(&got, &bits, 8);
            if (got != want)
                throw Failure(other + "'s key \"" + fk + "\" in mx_fixed: " + std::to_string(got) + ", want " +
                              std::to_string(want));
            std::uint64_t ikey = (o + 1) << 32 | i;
            std::string iv = wait_for(start, other + "'s key " + std::to_string(ikey) + " in mx_inline",
                                      [&] { return inl.get(le64(ikey)); });
            auto gi = static_cast<std::int64_t>(unle64(iv));
            std::int64_t wi = -static_cast<std::int64_t>(o * 1000 + i) - 1;
            if (gi != wi)
                throw Failure(other + "'s key " + std::to_string(ikey) + " in mx_inline: " + std::to_string(gi) +
                              ", want " + std::to_string(wi));
            checked += 3;
        }
    }

    for (const auto& l : langs) {
        std::string k = "done/" + l;
        wait_for(start, l + " to finish (" + k + ")", [&] { return sync.get(k); });
    }
    const std::uint64_t n = langs.size();
    auto total = count_var.get(std::string("total"));
    if (!total || static_cast<std::int64_t>(unle64(*total)) != static_cast<std::int64_t>(n * adds))
        throw Failure("mx_count_var \"total\": " + (total ? std::to_string(unle64(*total)) : "absent") + ", want " +
                      std::to_string(n * adds));
    for (std::uint64_t c = 0; c < 4; c++) {
        auto got = count_fixed.get(le64(c));
        std::uint64_t want = n * (adds / 4 + (c < adds % 4 ? 1 : 0));
        if (!got || unle64(*got) != want)
            throw Failure("mx_count_fixed key " + std::to_string(c) + ": " + (got ? std::to_string(unle64(*got)) : "absent") +
                          ", want " + std::to_string(want));
    }
    std::cout << "matrix " << lang << ": ok (" << vectors << " golden vectors; " << checked << " keys of " << n
              << " languages; counters " << n * adds << ")" << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 7) {
        std::cerr << "usage: worker STORE LANG LANGS KEYS ADDS VECTORS\n";
        return 2;
    }
    try {
        return run(argv);
    } catch (const std::exception& e) {
        std::cerr << "matrix " << argv[2] << ": FAILED: " << e.what() << std::endl;
        return 1;
    }
}
