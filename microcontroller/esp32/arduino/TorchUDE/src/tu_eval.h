/* Forwards to the repository header (Arduino adds only src/ to the include path). */
#include "../../../../support/tu_eval.h"
