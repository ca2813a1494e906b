/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "balloon" guest (tools/lab guest --workload balloon, and the same
 * inside the test host): no OS, a multiboot kernel that QEMU loads with
 * -kernel, and a driver for a legacy virtio balloon.  It writes to every
 * page of its memory once, so that the host has all of it resident, says
 * "unsteal-guest: ready" on the serial port, and then follows the
 * balloon's target for ever: it gives pages to the host (inflate) when the
 * target grows and takes them back and writes to them again (deflate)
 * when it shrinks, so that the host must fault them in once more.  That
 * is what a guest with a balloon or free-page reporting does to its QEMU
 * process's memory, which is what the memory-limit tests need; a Linux
 * guest nested in the TCG test host would take minutes to boot.
 *
 * Built on the host and in the test host's build root by the commands of
 * balloon_build_commands() in tools/lablib/lab/guest.py: gcc -m32
 * -ffreestanding, linked at 1 MiB into one segment (ld -N).
 *
 * Runs with interrupts off and polls the balloon's configuration.
 */

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

/*
 * The multiboot header (flag 1: give us the memory size) comes first in
 * .text, which keeps it within the first 8 KiB of the file, and the entry
 * point sets up a stack.  -fno-toplevel-reorder keeps this order.
 */
__asm__(
    ".text\n"
    ".p2align 2\n"
    ".long 0x1badb002, 0x00000002, -(0x1badb002 + 0x00000002)\n"
    ".globl _start\n"
    "_start:\n"
    "    cli\n"
    "    movl $stack + 16384, %esp\n"
    "    pushl %ebx\n"
    "    pushl %eax\n"
    "    call guest_main\n"
    "1:  hlt\n"
    "    jmp 1b\n");

#define PAGE_SIZE 4096u
#define MB_BOOTLOADER_MAGIC 0x2badb002u

/* The part of the multiboot information that we read */
struct multiboot_info {
    u32 flags;
    u32 mem_lower;      /* KiB below 1 MiB */
    u32 mem_upper;      /* KiB from 1 MiB to the first hole */
};

/* virtio PCI, legacy interface (the transitional device's I/O BAR) */
#define VIRTIO_VENDOR 0x1af4
#define VIRTIO_BALLOON_LEGACY_ID 0x1002
#define VIO_GUEST_FEATURES 4
#define VIO_QUEUE_PFN 8
#define VIO_QUEUE_SIZE 12
#define VIO_QUEUE_SELECT 14
#define VIO_QUEUE_NOTIFY 16
#define VIO_STATUS 18
#define VIO_CONFIG 20       /* without MSI-X */
#define BALLOON_NUM_PAGES (VIO_CONFIG + 0)
#define BALLOON_ACTUAL (VIO_CONFIG + 4)
#define STATUS_ACKNOWLEDGE 1
#define STATUS_DRIVER 2
#define STATUS_DRIVER_OK 4
#define INFLATE_QUEUE 0
#define DEFLATE_QUEUE 1

/*
 * Legacy virtqueues: the device sets their size (QEMU 7.2's balloon 128
 * entries, 10.0's 1024), the used ring is aligned to 4096.  Room for 1024:
 * descriptors and available ring in 5 pages, the used ring in 3.
 */
#define QUEUE_MAX 1024
#define QUEUE_BYTES 32768
#define PFNS_PER_REQUEST 256

struct vring_desc {
    u64 addr;
    u32 len;
    u16 flags;
    u16 next;
};

struct vq {
    u16 size;
    u16 next_avail;
    struct vring_desc *desc;
    volatile u16 *avail;        /* flags, idx, ring[size] */
    volatile u16 *used;         /* flags, idx, then the elements */
};

u8 stack[16384] __attribute__((aligned(16)));
static u8 rings[2][QUEUE_BYTES] __attribute__((aligned(PAGE_SIZE)));
static u32 pfns[PFNS_PER_REQUEST];
static struct vq queues[2];
static u16 iobase;


static inline void outb(u16 port, u8 v) { __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port)); }
static inline void outw(u16 port, u16 v) { __asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port)); }
static inline void outl(u16 port, u32 v) { __asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port)); }
static inline u8 inb(u16 port) { u8 v; __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port)); return v; }
static inline u16 inw(u16 port) { u16 v; __asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port)); return v; }
static inline u32 inl(u16 port) { u32 v; __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port)); return v; }
static inline void barrier(void) { __asm__ volatile("mfence" : : : "memory"); }


/* ---- serial console (COM1, as QEMU sets it up: no init needed) ---- */

static void
putc_serial(char c)
{
    while (!(inb(0x3f8 + 5) & 0x20))
        ;
    outb(0x3f8, (u8)c);
}


static void
puts_serial(const char *s)
{
    for (; *s; s++)
        putc_serial(*s);
}


static void
putu_serial(u32 v)
{
    char buf[11];
    int i = 10;

    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    puts_serial(buf + i);
}


static void
halt(const char *why)
{
    puts_serial("unsteal-balloon: ");
    puts_serial(why);
    puts_serial("\n");
    for (;;)
        __asm__ volatile("hlt");
}


/* ---- PCI configuration space, mechanism 1, bus 0 ---- */

static u32
pci_read(u32 dev, u32 off)
{
    outl(0xcf8, 0x80000000u | (dev << 11) | (off & 0xfc));
    return inl(0xcfc);
}


static void
pci_write(u32 dev, u32 off, u32 v)
{
    outl(0xcf8, 0x80000000u | (dev << 11) | (off & 0xfc));
    outl(0xcfc, v);
}


/* The I/O port base of the first legacy virtio balloon on bus 0 */
static u16
find_balloon(void)
{
    u32 dev;

    for (dev = 0; dev < 32; dev++) {
        u32 id = pci_read(dev, 0);
        u32 bar;

        if ((id & 0xffff) != VIRTIO_VENDOR || (id >> 16) != VIRTIO_BALLOON_LEGACY_ID)
            continue;
        bar = pci_read(dev, 0x10);
        if (!(bar & 1))
            halt("the balloon's BAR0 is not an I/O BAR");
        /* I/O space and bus mastering on; the status half is write-1-to-clear */
        pci_write(dev, 0x04, (pci_read(dev, 0x04) & 0xffff) | 0x5);
        return (u16)(bar & 0xfffc);
    }
    halt("no virtio balloon on PCI bus 0");
    return 0;
}


/* ---- the two virtqueues ---- */

static void
setup_queue(u16 index)
{
    struct vq *q = &queues[index];
    u8 *ring = rings[index];
    u32 used_off;
    u32 i;

    outw(iobase + VIO_QUEUE_SELECT, index);
    q->size = inw(iobase + VIO_QUEUE_SIZE);
    if (q->size == 0 || q->size > QUEUE_MAX) {
        puts_serial("unsteal-balloon: virtqueue ");
        putu_serial(index);
        puts_serial(" has ");
        putu_serial(q->size);
        puts_serial(" entries\n");
        halt("that is not 1 to QUEUE_MAX");
    }
    used_off = (16u * q->size + 2u * (3u + q->size) + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
    for (i = 0; i < QUEUE_BYTES; i++)
        ring[i] = 0;
    q->desc = (struct vring_desc *)ring;
    q->avail = (volatile u16 *)(ring + 16u * q->size);
    q->used = (volatile u16 *)(ring + used_off);
    q->next_avail = 0;
    outl(iobase + VIO_QUEUE_PFN, (u32)ring / PAGE_SIZE);
}


/* Hands n page frame numbers to the device on queue index and waits for it */
static void
send_pfns(u16 index, u32 n)
{
    struct vq *q = &queues[index];
    u16 slot = q->next_avail % q->size;

    q->desc[slot].addr = (u32)pfns;
    q->desc[slot].len = n * 4;
    q->desc[slot].flags = 0;
    q->desc[slot].next = 0;
    q->avail[2 + slot] = slot;
    barrier();
    q->next_avail++;
    q->avail[1] = q->next_avail;
    barrier();
    outw(iobase + VIO_QUEUE_NOTIFY, index);
    while (q->used[1] != q->next_avail)
        __asm__ volatile("pause");
}


/* ---- the memory the balloon takes from and gives back ---- */

static u32 pool_first;     /* first page frame of the pool */
static u32 pool_pages;     /* its size: page frames from pool_first up */


/* Writes to a page, so that the host must have it resident */
static void
touch(u32 pfn)
{
    *(volatile u32 *)(pfn * PAGE_SIZE) = pfn;
}


static void
idle(void)
{
    u32 i;

    for (i = 0; i < 200000; i++)
        __asm__ volatile("pause");
}


void guest_main(u32 magic, const struct multiboot_info *info);

void
guest_main(u32 magic, const struct multiboot_info *info)
{
    u32 top;
    u32 inflated = 0;   /* pages given to the host, from the top of the pool down */
    u32 i;

    if (magic != MB_BOOTLOADER_MAGIC || !(info->flags & 1))
        halt("not started by a multiboot loader with the memory size");

    /* From 4 MiB, above this program, to 1 MiB short of the end of memory,
     * where the firmware keeps its tables. */
    top = (1024u + info->mem_upper) / 4 - 256;
    pool_first = (4u << 20) / PAGE_SIZE;
    if (top <= pool_first)
        halt("too little memory: give the guest at least 8 MiB");
    pool_pages = top - pool_first;

    iobase = find_balloon();
    outb(iobase + VIO_STATUS, 0);
    outb(iobase + VIO_STATUS, STATUS_ACKNOWLEDGE);
    outb(iobase + VIO_STATUS, STATUS_ACKNOWLEDGE | STATUS_DRIVER);
    outl(iobase + VIO_GUEST_FEATURES, 0);
    setup_queue(INFLATE_QUEUE);
    setup_queue(DEFLATE_QUEUE);
    outb(iobase + VIO_STATUS, STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_DRIVER_OK);

    for (i = 0; i < pool_pages; i++)
        touch(pool_first + i);
    puts_serial("unsteal-balloon: ");
    putu_serial(pool_pages);
    puts_serial(" pages of ");
    putu_serial(info->mem_upper / 1024 + 1);
    puts_serial(" MiB in the pool\nunsteal-guest: ready\n");

    for (;;) {
        u32 target = inl(iobase + BALLOON_NUM_PAGES);
        u32 n;

        if (target > pool_pages)
            target = pool_pages;

        if (inflated < target) {
            n = target - inflated;
            if (n > PFNS_PER_REQUEST)
                n = PFNS_PER_REQUEST;
            for (i = 0; i < n; i++)
                pfns[i] = pool_first + pool_pages - 1 - (inflated + i);
            send_pfns(INFLATE_QUEUE, n);
            inflated += n;
        } else if (inflated > target) {
            n = inflated - target;
            if (n > PFNS_PER_REQUEST)
                n = PFNS_PER_REQUEST;
            for (i = 0; i < n; i++)
                pfns[i] = pool_first + pool_pages - inflated + i;
            send_pfns(DEFLATE_QUEUE, n);
            inflated -= n;
            for (i = 0; i < n; i++)
                touch(pfns[i]);
        } else {
            idle();
            continue;
        }

        outl(iobase + BALLOON_ACTUAL, inflated);
        if (inflated == target) {
            puts_serial("unsteal-balloon: ");
            putu_serial(inflated);
            puts_serial(" pages in the balloon\n");
        }
    }
}
