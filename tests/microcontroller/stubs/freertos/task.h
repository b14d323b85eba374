/* Test stub of ESP-IDF's freertos/task.h: only what the example uses (stack depth in bytes, as
 * in ESP-IDF). */
#ifndef FREERTOS_TASK_H
#define FREERTOS_TASK_H
#include "freertos/FreeRTOS.h"
BaseType_t xTaskCreatePinnedToCore(TaskFunction_t code, const char *name, uint32_t stack_bytes, void *arg,
                                   UBaseType_t priority, TaskHandle_t *handle, BaseType_t core);
void vTaskDelay(uint32_t ticks);
void vTaskDelete(TaskHandle_t task);
UBaseType_t uxTaskGetStackHighWaterMark(TaskHandle_t task);
#endif
