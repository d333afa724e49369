// shoal.h and shoal.hpp on their own, as C++17 (with -Wall -Wextra -Wpedantic -Werror).
#include "shoal.h"
#include "shoal.hpp"

int shoal_header_check_cpp();
int shoal_header_check_cpp() {
    shoal_options o{};
    o.struct_size = sizeof o;
    return static_cast<int>(SHOAL_OK) + static_cast<int>(o.open_mode);
}
