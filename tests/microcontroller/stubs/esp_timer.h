/* Test stub of ESP-IDF's esp_timer.h: only what the example uses. */
#ifndef ESP_TIMER_H
#define ESP_TIMER_H
#include <stdint.h>
int64_t esp_timer_get_time(void);
#endif
