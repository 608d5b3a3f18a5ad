/* Wine 8.0 has no bcryptprimitives.dll, and Rust's standard library for
 * Windows imports ProcessPrng from it (its random source since Rust 1.78).
 * This stand-in, placed beside the .exe under Wine only, exports ProcessPrng
 * on top of advapi32's RtlGenRandom (SystemFunction036), which Wine has.
 * Built by scripts/windows.sh with mingw; never shipped. */
#include <windows.h>

typedef BOOLEAN(WINAPI *gen_random_fn)(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    static gen_random_fn gen_random;
    if (!gen_random) {
        HMODULE advapi = LoadLibraryA("advapi32.dll");
        if (!advapi) return FALSE;
        gen_random = (gen_random_fn)(void *)GetProcAddress(advapi, "SystemFunction036");
        if (!gen_random) return FALSE;
    }
    while (length > 0) {
        ULONG chunk = length > 0x7fffffff ? 0x7fffffff : (ULONG)length;
        if (!gen_random(data, chunk)) return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
