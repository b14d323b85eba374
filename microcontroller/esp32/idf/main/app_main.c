/* ESP-IDF entry point: train on the simulated pendulum in a FreeRTOS task of its own and report
 * over the serial port. */
#include <stdint.h>
#include <stdio.h>

#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"

#include "tu_app.h"
#include "tu_trainer.h"

/* The training task's stack in bytes (ESP-IDF's xTaskCreatePinnedToCore counts bytes). The
 * deepest call path of the library and the application from tu_app_simulate takes 2,736 bytes
 * in the Cortex-M4F build (arm-none-eabi-gcc -O2 -fcallgraph-info=su, measured by
 * tests/microcontroller/test_esp32.py); the task gets twice that, for the larger frames of the
 * Xtensa windowed ABI, plus 4 KiB for newlib's printf of floats and the clock: 9,568 bytes,
 * rounded up to 10 KiB. The task prints the stack it left unused when it ends. */
#define TU_TASK_STACK 10240
/* Every second of training the task blocks for one tick, so that the idle task runs and the task
 * watchdog (5 s by default) is fed; the time blocked is left out of the clock's counts. */
#define TU_YIELD_EVERY_US 1000000

static tu_trainer trainer; /* about 61 kB of static RAM (B = 2048) */
static int64_t yielded_us;
static int64_t last_yield_us;

static uint64_t training_micros(void)
{
    int64_t now = esp_timer_get_time();
    if (now - last_yield_us >= TU_YIELD_EVERY_US) {
        vTaskDelay(1);
        const int64_t after = esp_timer_get_time();
        yielded_us += after - now;
        last_yield_us = now = after;
    }
    return (uint64_t)(now - yielded_us);
}

static void train(void *arg)
{
    tu_clock clock;
    float c_hat;
    tu_status st = tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, TU_DEFAULT_SEED);
    (void)arg;
    printf("torch-ude on ESP32: config %s, tu_trainer %u bytes, init: %s\n", TU_CONFIG_HASH,
           (unsigned)sizeof trainer, tu_status_string(st));
    clock.now = training_micros;
    clock.unit = "us";
    last_yield_us = esp_timer_get_time();
    c_hat = tu_app_simulate(&trainer, TU_SIM_SECONDS, 0.0f, -1.0f, clock, 1000);
    printf("final c_hat %.4f; training task stack never used: %u of %u bytes\n", (double)c_hat,
           (unsigned)uxTaskGetStackHighWaterMark(NULL), (unsigned)TU_TASK_STACK);
    vTaskDelete(NULL);
}

void app_main(void)
{
    /* the last core: the APP CPU on a dual-core ESP32 (the PRO CPU keeps Wi-Fi and the system's
     * tasks), core 0 on a single-core chip */
    if (xTaskCreatePinnedToCore(train, "torch_ude", TU_TASK_STACK, NULL, tskIDLE_PRIORITY + 1, NULL,
                                portNUM_PROCESSORS - 1) != pdPASS) {
        printf("torch-ude: no memory for the training task's %u-byte stack\n", (unsigned)TU_TASK_STACK);
    }
}
