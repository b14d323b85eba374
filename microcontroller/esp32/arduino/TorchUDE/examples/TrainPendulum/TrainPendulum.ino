// Train torch-ude on the ESP32 from its own simulated pendulum; prints every 1000 updates.
#include <TorchUDE.h>
#include <esp_timer.h>

static tu_trainer trainer;  // about 61 kB of static RAM (B = 2048)

// The trainer calls the clock once per update. Every second of training it also yields 1 ms
// (delay() blocks the task, so the idle task runs and the task watchdog is fed); the time spent
// yielding is left out of the counts, so the microseconds per update are those of training.
static const int64_t YIELD_EVERY_US = 1000000;
static int64_t yielded_us = 0;
static int64_t last_yield_us = 0;

static uint64_t training_micros(void) {
  int64_t now = esp_timer_get_time();  // microseconds since boot, 64-bit
  if (now - last_yield_us >= YIELD_EVERY_US) {
    delay(1);
    const int64_t after = esp_timer_get_time();
    yielded_us += after - now;
    last_yield_us = now = after;
  }
  return (uint64_t)(now - yielded_us);
}

void setup() {
  Serial.begin(115200);
  tu_trainer_init(&trainer, TU_DEFAULT_CONFIG, TU_DEFAULT_SEED);
  tu_clock clock = {training_micros, "us"};
  last_yield_us = esp_timer_get_time();
  float c_hat = tu_app_simulate(&trainer, TU_SIM_SECONDS, 0.0f, -1.0f, clock, 1000);
  Serial.printf("final c_hat %.4f\n", (double)c_hat);
}

void loop() {}
