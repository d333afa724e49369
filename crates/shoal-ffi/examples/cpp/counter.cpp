// counter: a counter shared by several processes, each incrementing it N times.
//
//     for i in 1 2 3 4; do ./counter demo-counter 1000 & done; wait
//     ./counter demo-counter 0 --expect 4000
//
// Each increment is one atomic add on the map "counter" (shoal_map_add: the value is an
// 8-byte little-endian integer, an absent key counts as 0). No increment is lost however
// the processes interleave, and a process killed at any moment leaves the counter
// consistent and blocks nobody.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "shoal.hpp"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::cerr << "usage: " << argv[0] << " STORE N [--expect TOTAL]\n";
        return 2;
    }
    try {
        shoal::Store store(argv[1]);
        shoal::Map counter = store.map("counter");
        long n = std::atol(argv[2]);
        for (long i = 0; i < n; i++) counter.add("hits", 1);
        std::int64_t value = counter.add("hits", 0);  // reads it (and creates it at 0)
        std::cout << "counter: " << value << "\n";
        if (argc > 4 && std::strcmp(argv[3], "--expect") == 0) {
            std::int64_t want = std::stoll(argv[4]);
            if (value != want) {
                std::cerr << "counter: expected " << want << ", found " << value << "\n";
                return 1;
            }
        }
    } catch (const shoal::Error& e) {
        std::cerr << "counter: " << e.what() << " (status " << e.code() << ")\n";
        return 1;
    }
    return 0;
}
