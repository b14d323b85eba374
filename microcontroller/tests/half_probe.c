/* The binary16 conversions of tu_half.h for tests/microcontroller/test_half.py, on the host and on the
 * emulated Cortex-M4F: reads float32 values (raw bytes) from argv[1] and writes to argv[2], raw
 * little-endian bytes, five sections:
 *   1. the float32 value of every binary16 pattern 0 .. 65535 (tu_half_to_float),
 *   2. the binary16 pattern of each value read (tu_half_from_float),
 *   3. section 1 by the portable path (tu_half_to_float_soft),
 *   4. section 1 by tu_half_to_float_number (whose contract excludes the NaN patterns),
 *   5. section 2 by the portable path (tu_half_from_float_soft).
 * Where the build uses the FPU's conversions (TU_HALF_HARDWARE 1) sections 1, 2 and 4 are the FPU's and
 * 3 and 5 the integer arithmetic's; elsewhere all five are the portable path. stdout: the line
 * "hardware H fpscr X" (X: the FPSCR in hex on an ARM FPU, else 0). */
#include <stdint.h>
#include <stdio.h>

#include "tu_half.h"

static uint32_t fpscr(void)
{
#if TU_HALF_HARDWARE && defined(__GNUC__) && defined(__ARM_FP) && !defined(__aarch64__)
    return __builtin_arm_get_fpscr();
#else
    return 0u;
#endif
}

static void halves_to_floats(FILE *out, float (*convert)(uint16_t))
{
    uint32_t k;
    for (k = 0; k < 65536u; ++k) {
        const float value = convert((uint16_t)k);
        fwrite(&value, sizeof value, 1, out);
    }
}

static void floats_to_halves(FILE *in, FILE *out, uint16_t (*convert)(float))
{
    float value;
    rewind(in);
    while (fread(&value, sizeof value, 1, in) == 1) {
        const uint16_t half = convert(value);
        fwrite(&half, sizeof half, 1, out);
    }
}

static float to_float(uint16_t half)
{
    return tu_half_to_float(half);
}

static float to_float_soft(uint16_t half)
{
    return tu_half_to_float_soft(half);
}

static float to_float_number(uint16_t half)
{
    return tu_half_to_float_number(half);
}

int main(int argc, char **argv)
{
    FILE *in, *out;
    if (argc != 3 || (in = fopen(argv[1], "rb")) == NULL || (out = fopen(argv[2], "wb")) == NULL) {
        fprintf(stderr, "usage: half_probe FLOATS.bin OUT.bin\n");
        return 2;
    }
    printf("hardware %d fpscr %lx\n", TU_HALF_HARDWARE, (unsigned long)fpscr());
    halves_to_floats(out, to_float);
    floats_to_halves(in, out, tu_half_from_float);
    halves_to_floats(out, to_float_soft);
    halves_to_floats(out, to_float_number);
    floats_to_halves(in, out, tu_half_from_float_soft);
    fclose(in);
    return fclose(out) == 0 ? 0 : 1;
}
