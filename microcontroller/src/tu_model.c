/* The one translation unit that includes the generated tables (static const, in flash). */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include "tu_model.h"
#include "tu_model_data.h"

const tu_model *tu_model_tables(void)
{
    return &TU_MODEL_DATA;
}
