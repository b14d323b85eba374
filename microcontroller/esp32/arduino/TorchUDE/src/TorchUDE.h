/* Arduino entry header of the torch-ude C library. The sources are compiled from the repository
 * by torch_ude_sources.c and the headers forwarded by the tu_*.h files here, so nothing is
 * copied; tu_config.h and tu_model_data.h are generated into this folder. */
#ifndef TORCH_UDE_ARDUINO_H
#define TORCH_UDE_ARDUINO_H

#ifdef __cplusplus
extern "C" {
#endif

#include "tu_trainer.h"
#include "tu_app.h"

#ifdef __cplusplus
}
#endif

#endif /* TORCH_UDE_ARDUINO_H */
