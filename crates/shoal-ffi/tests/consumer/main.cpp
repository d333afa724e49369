// Uses the installed headers and library: a put and a get through shoal.hpp.
#include <shoal.h>
#include <shoal.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

int main() {
    std::string path = "/tmp/shoal-consumer-" + std::to_string(getpid()) + ".shoal";
    {
        shoal::Store store(path);
        shoal::Map m = store.map("installed");
        m.put("hello", "world");
        if (m.get("hello") != std::optional<std::string>("world")) return 1;
    }
    shoal::Store::destroy(path);
    std::printf("consumer ok (libshoal %s)\n", shoal_version());
    return 0;
}
