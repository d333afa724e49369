/* shoal.h on its own, as strict C (compiled with -Wall -Wextra -Wpedantic -Werror). */
#include "shoal.h"

int shoal_header_check_c(void);
int shoal_header_check_c(void) {
    shoal_options o = {.struct_size = sizeof o};
    shoal_status s = SHOAL_OK;
    return (int)s + (int)o.open_mode + SHOAL_MAP_CREATE;
}
