/* bcryptprimitives.dll for Wine 8.0 (Debian 12), which has none.
 *
 * Rust's standard library for Windows takes its randomness (HashMap keys)
 * from ProcessPrng in bcryptprimitives.dll, as Windows 10 and later have
 * it; Wine added the DLL only in 9.x. tests/wine.sh builds this into the
 * test prefix's system32, so Windows builds of Drover start under Wine at
 * all. It is not part of any Drover build: on Windows the system's own is
 * used. ProcessPrng fills the buffer from the system's generator, as the
 * real one does, and always succeeds. */
#include <windows.h>
#include <bcrypt.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0)
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
