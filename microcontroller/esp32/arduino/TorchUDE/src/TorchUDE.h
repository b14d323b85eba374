/* Arduino entry header of the torch-ude C library. The library's sources and headers and the
 * generated tu_config.h, tu_model_data.h and tu_plant_code.h are written into this folder by
 *   python -m microcontroller.generate --config CONFIG --with-sources --out .../TorchUDE/src
 * (microcontroller/esp32/README.md), so the library folder holds everything it compiles. */
#ifndef TORCH_UDE_ARDUINO_H
#define TORCH_UDE_ARDUINO_H

#if !__has_include("tu_config.h")
#error "TorchUDE: src/ holds no generated sources; run python -m microcontroller.generate ... --with-sources --out <this library>/src (microcontroller/esp32/README.md)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include "tu_trainer.h"
#include "tu_app.h"

#ifdef __cplusplus
}
#endif

#endif /* TORCH_UDE_ARDUINO_H */
