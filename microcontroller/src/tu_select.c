/* Quickselect (Hoare partition, middle pivot), in place. */
#define TU_LIBRARY 1 /* the library reads its configuration from a tu_config, no single-configuration macro */
#include "tu_fp.h" /* first: no fused multiply-add in the library */

#include "tu_select.h"

float tu_lower_median(float *values, int n)
{
    const int k = (n - 1) / 2;
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const float pivot = values[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (values[i] < pivot) {
                ++i;
            }
            while (values[j] > pivot) {
                --j;
            }
            if (i <= j) {
                const float t = values[i];
                values[i] = values[j];
                values[j] = t;
                ++i;
                --j;
            }
        }
        if (k <= j) {
            hi = j;
        } else if (k >= i) {
            lo = i;
        } else {
            break;
        }
    }
    return values[k];
}
