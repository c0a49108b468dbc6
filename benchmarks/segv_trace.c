/* The native stack of a fatal signal, written by a library preloaded with LD_PRELOAD.
 *
 * Python's faulthandler shows the Python frames of a crash, not which native library crashed
 * (nvImageCodec, cupy, numba-cuda, the CUDA runtime...). Preloaded, this library's constructor
 * installs a handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT, on an alternate signal stack,
 * that writes the signal, the faulting address, the thread and its native frames (library and
 * offset, the symbol where the library exports one), then raises the signal again with its default
 * action: the process dies of it as it would have without this library.
 *
 * The trace goes to the process's stderr as it was at start (a copy of fd 2 taken then, since
 * pytest points fd 2 at a capture file during each test) and, when SEGV_TRACE_DIR names a folder,
 * to SEGV_TRACE_DIR/segv-<pid>.txt too (a Ray worker's stderr goes to Ray's own logs). Python's
 * faulthandler, enabled after this constructor ran (by pytest, or `python -X faulthandler`), runs
 * first on a crash: it writes the Python frames, puts this handler back and raises the signal
 * again, so both traces appear, Python's first. This handler then sees the signal as raised by the
 * process; the frames below the second `<signal handler called>` are the crash's, and on x86_64 the
 * first signal frame's context gives where the signal was first delivered and the fault address.
 *
 *   gcc -shared -fPIC -O1 -g -o segv_trace.so benchmarks/segv_trace.c
 *   LD_PRELOAD=$PWD/segv_trace.so python -X faulthandler -m pytest tests/...
 *
 * The handler makes async-signal-safe calls only: write, open, fstat, getpid, the gettid and
 * prctl system calls, sigaction, raise, glibc's backtrace_symbols_fd and backtrace, and libgcc's
 * _Unwind_Backtrace (backtrace's first call loads libgcc_s, so the constructor makes one).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#define MAX_FRAMES 128
#define ALT_STACK_BYTES (128 * 1024)
#define PREFIX "segv_trace: "

struct fatal_signal {
    int number;
    const char *name;
    const char *what;
};

static const struct fatal_signal SIGNALS[] = {
    {SIGSEGV, "SIGSEGV", "segmentation fault"}, {SIGBUS, "SIGBUS", "bus error"},
    {SIGILL, "SIGILL", "illegal instruction"},  {SIGFPE, "SIGFPE", "arithmetic exception"},
    {SIGABRT, "SIGABRT", "aborted"},
};
#define SIGNAL_COUNT (sizeof SIGNALS / sizeof SIGNALS[0])

/* fd 2 as it was at start, and the file it was then (to notice that its number was reused). */
static int start_stderr = -1;
static dev_t start_stderr_dev;
static ino_t start_stderr_ino;
/* SEGV_TRACE_DIR "/segv-", or empty when SEGV_TRACE_DIR is unset (or too long for a line). */
static char trace_prefix[400];
static char alt_stack[ALT_STACK_BYTES];
/* Where a signal handler returns to (glibc's __restore_rt): marks the signal frames of a trace. */
static uintptr_t restorer;

/* A line built without malloc or stdio. */
struct line {
    char text[512];
    size_t len;
};

static void put(struct line *line, const char *text) {
    while (*text && line->len < sizeof line->text - 1) line->text[line->len++] = *text++;
}

static void put_unsigned(struct line *line, uintmax_t value, unsigned base) {
    char digits[32];
    size_t count = 0;
    do {
        digits[count++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value);
    if (base == 16) put(line, "0x");
    while (count && line->len < sizeof line->text - 1) line->text[line->len++] = digits[--count];
}

static void write_all(int fd, const char *text, size_t len) {
    while (len) {
        ssize_t done = write(fd, text, len);
        if (done <= 0) return;
        text += done;
        len -= (size_t)done;
    }
}

/* The copy of the start's stderr while it is still that file, else the present fd 2. */
static int stderr_fd(void) {
    struct stat now;
    if (start_stderr >= 0 && fstat(start_stderr, &now) == 0 && now.st_dev == start_stderr_dev &&
        now.st_ino == start_stderr_ino)
        return start_stderr;
    return STDERR_FILENO;
}

/* SEGV_TRACE_DIR/segv-<pid>.txt opened for appending, or -1. */
static int open_trace_file(void) {
    struct line path = {.len = 0};
    if (!trace_prefix[0]) return -1;
    put(&path, trace_prefix);
    put_unsigned(&path, (uintmax_t)getpid(), 10);
    put(&path, ".txt");
    path.text[path.len] = '\0';
    return open(path.text, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void emit(const int *fds, size_t count, struct line *line) {
    put(line, "\n");
    for (size_t i = 0; i < count; i++) write_all(fds[i], line->text, line->len);
    line->len = 0;
}

/* What the kernel says of a fault it signalled, or NULL (a signal sent by a process has no such code). */
static const char *fault_kind(const siginfo_t *info) {
    if (info->si_code <= 0) return NULL;
    if (info->si_signo == SIGSEGV && info->si_code == SEGV_MAPERR) return "address not mapped";
    if (info->si_signo == SIGSEGV && info->si_code == SEGV_ACCERR) return "access not permitted";
    if (info->si_signo == SIGBUS && info->si_code == BUS_ADRALN) return "misaligned address";
    if (info->si_signo == SIGBUS && info->si_code == BUS_ADRERR) return "no such physical address";
    if (info->si_signo == SIGBUS && info->si_code == BUS_OBJERR) return "object-specific hardware error";
    return NULL;
}

static void *interrupted_pc(const ucontext_t *uc) {
#if defined(__x86_64__)
    return (void *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (void *)uc->uc_mcontext.pc;
#else
    (void)uc;
    return NULL;
#endif
}

/* The signal frames on this thread's stack, found by unwinding: libgcc's unwinder reads the kernel's
 * ucontext of a signal frame (the frame at sa_restorer) at that frame's CFA. */
struct signal_frames {
    int count;
    const ucontext_t *oldest;
};

static _Unwind_Reason_Code visit_frame(struct _Unwind_Context *frame, void *data) {
    struct signal_frames *found = data;
    if (restorer && _Unwind_GetIP(frame) == restorer) {
        found->count++;
        found->oldest = (const ucontext_t *)_Unwind_GetCFA(frame);
    }
    return _URC_NO_REASON;
}

/* Where the signal was first delivered when a handler caught it before this one and raised it again
 * (Python's faulthandler does, after its own trace): the oldest of several signal frames. That
 * handler took no siginfo (faulthandler sets no SA_SIGINFO), but the frame's context still holds the
 * interrupted instruction and, on x86_64, cr2: the address of the last page fault. */
static void write_first_delivery(const int *fds, size_t fd_count) {
    struct signal_frames found = {0};
    struct line line = {.len = 0};
    void *pc;
    _Unwind_Backtrace(visit_frame, &found);
    if (found.count < 2) return;
    pc = interrupted_pc(found.oldest);
    put(&line, PREFIX "first delivered, before a handler raised it again: interrupted at ");
    put_unsigned(&line, (uintptr_t)pc, 16);
#if defined(__x86_64__)
    put(&line, ", fault address (cr2) ");
    put_unsigned(&line, (uintptr_t)found.oldest->uc_mcontext.gregs[REG_CR2], 16);
#endif
    put(&line, pc ? ", in" : "");
    emit(fds, fd_count, &line);
    for (size_t i = 0; pc && i < fd_count; i++) backtrace_symbols_fd(&pc, 1, fds[i]);
}

static void on_fatal_signal(int number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    int fds[2] = {stderr_fd(), open_trace_file()};
    size_t fd_count = fds[1] >= 0 ? 2 : 1;
    const struct fatal_signal *sig = NULL;
    struct line line = {.len = 0};
    void *frames[MAX_FRAMES];
    char thread_name[17] = {0};
    const char *kind = fault_kind(info);
    void *pc = interrupted_pc(context);
    struct sigaction default_action;
    int frame_count;

    for (size_t i = 0; i < SIGNAL_COUNT; i++)
        if (SIGNALS[i].number == number) sig = &SIGNALS[i];
    put(&line, PREFIX);
    put(&line, sig ? sig->name : "signal");
    put(&line, " (");
    put(&line, sig ? sig->what : "fatal");
    if (kind) {
        put(&line, ", ");
        put(&line, kind);
    }
    put(&line, ")");
    if (info->si_code > 0) {
        put(&line, " at address ");
        put_unsigned(&line, (uintptr_t)info->si_addr, 16);
    } else {
        put(&line, info->si_pid == getpid() ? " raised by this process, pid " : " sent by pid ");
        put_unsigned(&line, (uintmax_t)info->si_pid, 10);
    }
    emit(fds, fd_count, &line);

    prctl(PR_GET_NAME, thread_name, 0, 0, 0);
    put(&line, PREFIX "pid ");
    put_unsigned(&line, (uintmax_t)getpid(), 10);
    put(&line, ", thread ");
    put_unsigned(&line, (uintmax_t)syscall(SYS_gettid), 10);
    put(&line, " \"");
    put(&line, thread_name);
    put(&line, "\", interrupted at ");
    put_unsigned(&line, (uintptr_t)pc, 16);
    put(&line, pc ? ", in" : "");
    emit(fds, fd_count, &line);
    for (size_t i = 0; pc && i < fd_count; i++) backtrace_symbols_fd(&pc, 1, fds[i]);
    if (info->si_code <= 0 && info->si_pid == getpid()) write_first_delivery(fds, fd_count);

    frame_count = backtrace(frames, MAX_FRAMES);
    put(&line, PREFIX "native frames of that thread, most recent call first:");
    emit(fds, fd_count, &line);
    for (int frame = 0; frame < frame_count; frame++) {
        put(&line, "  #");
        put_unsigned(&line, (uintmax_t)frame, 10);
        if ((uintptr_t)frames[frame] == restorer) {
            put(&line, " <signal handler called>");
            emit(fds, fd_count, &line);
            continue;
        }
        put(&line, " ");
        for (size_t i = 0; i < fd_count; i++) {
            write_all(fds[i], line.text, line.len);
            backtrace_symbols_fd(&frames[frame], 1, fds[i]);
        }
        line.len = 0;
    }
    put(&line, PREFIX "end of the native trace; the process dies of ");
    put(&line, sig ? sig->name : "the signal");
    emit(fds, fd_count, &line);
    if (fd_count == 2) close(fds[1]);

    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(number, &default_action, NULL);
    errno = saved_errno;
    /* Pending until this handler returns (the signal is blocked while it runs), then fatal; a fault
     * would also repeat on return, but a signal sent by kill or abort would not. */
    raise(number);
}

__attribute__((constructor)) static void install(void) {
    const char *dir = getenv("SEGV_TRACE_DIR");
    struct stat start;
    stack_t stack = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    stack_t present;
    struct sigaction action, installed;
    void *warm[4];

    start_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (start_stderr >= 0 && fstat(start_stderr, &start) == 0) {
        start_stderr_dev = start.st_dev;
        start_stderr_ino = start.st_ino;
    } else {
        start_stderr = -1;
    }
    if (dir && *dir && strlen(dir) + sizeof "/segv-" <= sizeof trace_prefix) {
        strcpy(trace_prefix, dir);
        strcat(trace_prefix, "/segv-");
    }
    backtrace(warm, 4);
    if (sigaltstack(NULL, &present) == 0 && (present.ss_flags & SS_DISABLE)) sigaltstack(&stack, NULL);

    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < SIGNAL_COUNT; i++) sigaction(SIGNALS[i].number, &action, NULL);
#if defined(__x86_64__)
    if (sigaction(SIGSEGV, NULL, &installed) == 0) restorer = (uintptr_t)installed.sa_restorer;
#else
    (void)installed;
#endif
}
