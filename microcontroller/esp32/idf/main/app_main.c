/* ESP-IDF entry point: train on the simulated pendulum and report over the serial port. */
#include <stdio.h>

#include "esp_timer.h"

#include "tu_app.h"
#include "tu_trainer.h"

static tu_trainer trainer; /* about 61 kB of static RAM (B = 2048) */

static uint64_t micros(void)
{
    return (uint64_t)esp_timer_get_time();
}

void app_main(void)
{
    tu_clock clock;
    tu_status st = tu_trainer_init(&trainer, TU_DEFAULT_SEED);
    printf("torch-ude on ESP32: config %s, tu_trainer %u bytes, init: %s\n", TU_CONFIG_HASH,
           (unsigned)sizeof trainer, tu_status_string(st));
    clock.now = micros;
    clock.unit = "us";
    printf("final c_hat %.4f\n", (double)tu_app_simulate(&trainer, TU_SIM_SECONDS, 0.0f, -1.0f, clock, 1000));
}
