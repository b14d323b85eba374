/* The one translation unit that compiles the generated plant code (tu_plant_code.h, see tu_plant.h). */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include "tu_plant.h"
#include "tu_plant_code.h"
