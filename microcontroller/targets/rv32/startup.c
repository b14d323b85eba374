/* Trap handling, exit and timer of the RISC-V firmware on QEMU's virt machine, for rv32imafc
 * (ESP32-P4 class) and rv32imac (ESP32-C3/C6 class, no FPU). picolibc's semihosting crt0 does the
 * rest: .data, .bss, the FPU in mstatus (rv32imafc), argv, main, exit.
 *
 * - Every trap (an access fault, an illegal instruction, ...) exits with status 3: a constructor
 *   points mtvec at the handler before main, so a crashed firmware ends the emulation.
 * - picolibc's _exit reports every status as 0 to QEMU on rv32 (its plain SYS_EXIT carries no
 *   status there); this one uses SYS_EXIT_EXTENDED, so QEMU exits with main's status.
 * - The timer is the minstret counter: QEMU counts instructions in it under -icount shift=0 (one
 *   instruction a tick) and host clock ticks without -icount. */
#include <semihost.h>
#include <stdint.h>
#include <unistd.h>

#include "tu_target.h"

const uint32_t tu_target_instructions_per_tick = 1u;

/* The CSR instructions (Zicsr) for every -march: rv32imac alone does not name them, and
 * -march=rv32imac_zicsr would miss GCC 12's multilib (picolibc) directories. */
#define TU_CSR(instruction) ".option push\n\t.option arch, +zicsr\n\t" instruction "\n\t.option pop"

static uint64_t timer_origin;

static uint64_t minstret(void)
{
    uint32_t high, low, again;
    do { /* the high word again: a carry between the two reads shows as a change */
        __asm volatile(TU_CSR("csrr %0, minstreth") : "=r"(high));
        __asm volatile(TU_CSR("csrr %0, minstret") : "=r"(low));
        __asm volatile(TU_CSR("csrr %0, minstreth") : "=r"(again));
    } while (high != again);
    return ((uint64_t)high << 32) | low;
}

void tu_target_timer_start(void)
{
    timer_origin = minstret();
}

uint64_t tu_target_timer_now(void)
{
    return minstret() - timer_origin;
}

void _exit(int status)
{
    sys_semihost_exit_extended((uintptr_t)status);
}

__attribute__((aligned(4))) static void trap_handler(void)
{
    _exit(3);
}

__attribute__((constructor)) static void trap_setup(void)
{
    __asm volatile(TU_CSR("csrw mtvec, %0") ::"r"((uintptr_t)trap_handler)); /* direct mode: bits 1:0 are 0 */
}
