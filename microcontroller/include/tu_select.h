/* Order statistics in place (quickselect): the running medians of the misfit gate and the
 * outlier screen of the calibration. */
#ifndef TU_SELECT_H
#define TU_SELECT_H

/** The lower median of values[0..n) (element (n - 1) / 2 of the sorted order, like
 * torch.median); reorders the array in place. n >= 1. */
float tu_lower_median(float *values, int n);

#endif /* TU_SELECT_H */
