/* Forwards to the repository header (Arduino adds only src/ to the include path). */
#include "../../../../include/tu_math.h"
