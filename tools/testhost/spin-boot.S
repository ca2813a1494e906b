/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Boot sector of the "busy" guests inside the test host (tools/lab testhost)
 * and of the "spin" guests on the host (tools/lab guest --workload spin):
 * no guest OS, every vCPU spins.  SeaBIOS loads it at 0x7c00 on the boot
 * processor, which puts a "jmp ." at 0x8000, wakes the application
 * processors there with INIT + SIPI (vector 0x08) through the local APIC,
 * and spins itself.  Built in the test host's build root, and on the host
 * by tools/lablib/lab/guest.py, with:
 *   as --32 -o spin-boot.o spin-boot.S
 *   ld -m elf_i386 -Ttext 0x7c00 --oformat binary -o spin-boot.img spin-boot.o
 */
	.code16
	.globl _start
_start:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	movw	$0xfeeb, 0x8000		/* the APs' code: jmp . */
	lgdtl	gdtr
	movl	%cr0, %eax
	orl	$1, %eax
	movl	%eax, %cr0
	ljmpl	$0x08, $pm
	.code32
pm:
	movw	$0x10, %ax
	movw	%ax, %ds
	movl	$0xfee00300, %ebx	/* local APIC: interrupt command register */
	movl	$0x000c4500, (%ebx)	/* INIT to all but self */
	movl	$1000000, %ecx
1:	loop	1b
	movl	$0x000c4608, (%ebx)	/* STARTUP at 0x8000 */
	movl	$100000, %ecx
2:	loop	2b
	movl	$0x000c4608, (%ebx)	/* the second STARTUP of the MP spec */
3:	jmp	3b
	.p2align 3
gdt:
	.quad	0
	.quad	0x00cf9a000000ffff	/* flat 32-bit code */
	.quad	0x00cf92000000ffff	/* flat 32-bit data */
gdtr:
	.word	gdtr - gdt - 1
	.long	gdt
	.org	510
	.word	0xaa55
