/* Test stub of ESP-IDF's freertos/FreeRTOS.h: only what the example uses. */
#ifndef FREERTOS_H
#define FREERTOS_H
#include <stdint.h>
typedef int BaseType_t;
typedef unsigned int UBaseType_t;
typedef void *TaskHandle_t;
typedef void (*TaskFunction_t)(void *);
#define pdPASS 1
#define tskIDLE_PRIORITY 0u
#define portNUM_PROCESSORS 2
#endif
