/* The binary16 conversions of tu_half.h for the host test (tests/microcontroller/test_half.py):
 * reads float32 values (raw bytes) from argv[1], writes to argv[2] the float32 value of every
 * binary16 pattern 0 .. 65535 (tu_half_to_float) and then the binary16 pattern of each value read
 * (tu_half_from_float), raw little-endian bytes. */
#include <stdint.h>
#include <stdio.h>

#include "tu_half.h"

int main(int argc, char **argv)
{
    FILE *in, *out;
    float value;
    uint32_t k;
    if (argc != 3 || (in = fopen(argv[1], "rb")) == NULL || (out = fopen(argv[2], "wb")) == NULL) {
        fprintf(stderr, "usage: half_probe FLOATS.bin OUT.bin\n");
        return 2;
    }
    for (k = 0; k < 65536u; ++k) {
        value = tu_half_to_float((uint16_t)k);
        fwrite(&value, sizeof value, 1, out);
    }
    while (fread(&value, sizeof value, 1, in) == 1) {
        const uint16_t half = tu_half_from_float(value);
        fwrite(&half, sizeof half, 1, out);
    }
    fclose(in);
    return fclose(out) == 0 ? 0 : 1;
}
