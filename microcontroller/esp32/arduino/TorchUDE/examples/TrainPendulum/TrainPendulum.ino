// Train torch-ude on the ESP32 from its own simulated pendulum; prints every 1000 updates.
#include <TorchUDE.h>

static tu_trainer trainer;  // about 61 kB of static RAM (B = 2048)

static uint64_t clock_micros(void) { return (uint64_t)micros(); }

void setup() {
  Serial.begin(115200);
  tu_trainer_init(&trainer, TU_DEFAULT_SEED);
  tu_clock clock = {clock_micros, "us"};
  float c_hat = tu_app_simulate(&trainer, TU_SIM_SECONDS, 0.0f, -1.0f, clock, 1000);
  Serial.printf("final c_hat %.4f\n", (double)c_hat);
}

void loop() {}
