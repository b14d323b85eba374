/* Vector table, reset handler and timer of the mps2-an386 (Cortex-M4F) firmware. The reset handler
 * turns on the FPU and hands over to newlib's rdimon crt0 (_start: .bss, semihosting stdio, argv,
 * main, exit). Every fault exits through semihosting with status 3, so a crashed firmware ends the
 * emulation instead of spinning forever. The timer is CMSDK APB timer 0 (25 MHz: 40 instructions
 * a tick at QEMU's 1 GHz virtual clock under -icount shift=0). */
#include <stdint.h>
#include <stdlib.h>

#include "tu_target.h"

#define TIMER0 ((volatile uint32_t *)0x40000000u) /* CMSDK APB timer 0: CTRL, VALUE, RELOAD */

typedef void (*tu_vector)(void);

extern uint32_t __stack_top;
extern void _exit(int status); /* newlib's (rdimon: a semihosting exit) */
extern void _start(void);
void Reset_Handler(void);
void Fault_Handler(void);

const uint32_t tu_target_instructions_per_tick = 40u; /* 25 MHz timer, 1 GHz virtual clock */

void tu_target_timer_start(void)
{
    TIMER0[0] = 0u;
    TIMER0[2] = 0xFFFFFFFFu;
    TIMER0[1] = 0xFFFFFFFFu;
    TIMER0[0] = 1u;
}

uint64_t tu_target_timer_now(void)
{
    return 0xFFFFFFFFu - TIMER0[1]; /* it counts down */
}

void Reset_Handler(void)
{
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: full access to CP10 and CP11 (the FPU) */
    __asm volatile("dsb\n\tisb" ::: "memory");
    _start();
}

void Fault_Handler(void)
{
    _exit(3);
}

__attribute__((section(".isr_vector"), used)) const tu_vector tu_vector_table[16] = {
    (tu_vector)(uintptr_t)&__stack_top, /* initial stack pointer (crt0 sets its own) */
    Reset_Handler, Fault_Handler,       /* reset, NMI */
    Fault_Handler, Fault_Handler,       /* hard fault, memory management */
    Fault_Handler, Fault_Handler,       /* bus fault, usage fault */
    0, 0, 0, 0,                         /* reserved */
    Fault_Handler, Fault_Handler,       /* SVC, debug monitor */
    0,                                  /* reserved */
    Fault_Handler, Fault_Handler,       /* PendSV, SysTick */
};
