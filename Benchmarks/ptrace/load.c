/* The programs scripts/bench runs traced and untraced (`ptrace-syscalls`, `ptrace-cpu`):
 *
 *   load syscalls N    N getppid() system calls
 *   load cpu N         N rounds of integer arithmetic, no system call */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long n = atol(argv[2]);
    if (strcmp(argv[1], "syscalls") == 0) {
        for (long i = 0; i < n; i++) syscall(SYS_getppid);
        return 0;
    }
    if (strcmp(argv[1], "cpu") == 0) {
        volatile unsigned long x = 1;
        for (long i = 0; i < n; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
        return x == 0;
    }
    return 2;
}
