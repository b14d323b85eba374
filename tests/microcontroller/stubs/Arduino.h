/* Test stub of the Arduino core: only what the example uses. */
#ifndef ARDUINO_H
#define ARDUINO_H
#include <stdint.h>
#include <stdio.h>
void delay(uint32_t ms);
struct HardwareSerialStub {
    void begin(unsigned long) {}
    template <typename... A> int printf(const char *f, A... a) { return ::printf(f, a...); }
};
extern HardwareSerialStub Serial;
#endif
