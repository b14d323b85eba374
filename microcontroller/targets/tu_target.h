/* What a firmware target (targets/<name>/startup.c) gives the shared firmware (targets/main.c):
 * a free-running timer. The target's startup also ends every fault with exit status 3. */
#ifndef TU_TARGET_H
#define TU_TARGET_H

#include <stdint.h>

/** Instructions per timer tick under QEMU's -icount shift=0 (one instruction per ns). */
extern const uint32_t tu_target_instructions_per_tick;

/** (Re)start the timer at zero. */
void tu_target_timer_start(void);

/** Timer ticks since the last tu_target_timer_start: instructions / tu_target_instructions_per_tick
 * under -icount shift=0, host-time ticks without it. */
uint64_t tu_target_timer_now(void);

#endif /* TU_TARGET_H */
