/* How the library rounds: every product and sum separately, never fused into one multiply-add.
 * Every source of the library includes this header first, and no header of the API includes it,
 * so its pragma reaches the library's functions only. It holds whatever flags a build passes: GCC
 * fuses under its default -std=gnu99/gnu17 (the Arduino IDE's and ESP-IDF's, which also cannot
 * take -ffp-contract=off from the IDE), on the ESP32's LX6 (MADD.S) as on the Cortex-M4F (VFMA),
 * and fused results differ from the host's and the float32 Python reference's. GCC ignores the
 * standard pragma STDC FP_CONTRACT and honours its own optimize pragma; clang honours the
 * standard one. */
#ifndef TU_FP_H
#define TU_FP_H

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#endif /* TU_FP_H */
