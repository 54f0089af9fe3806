// Clang thread-safety annotations (-Wthread-safety). Under other compilers
// they expand to nothing, so annotated code builds everywhere; the clang
// build (dev.sh's ThreadSanitizer build) checks them, with warnings as errors.
//
//   class Counter {
//     Mutex mu_;
//     int64_t n_ GUARDED_BY(mu_) = 0;
//   };
#pragma once

#if defined(__clang__)
#define ICEFLOE_TSA(x) __attribute__((x))
#else
#define ICEFLOE_TSA(x)
#endif

#define CAPABILITY(x) ICEFLOE_TSA(capability(x))
#define SCOPED_CAPABILITY ICEFLOE_TSA(scoped_lockable)
#define GUARDED_BY(x) ICEFLOE_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) ICEFLOE_TSA(pt_guarded_by(x))
#define REQUIRES(...) ICEFLOE_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) ICEFLOE_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) ICEFLOE_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) ICEFLOE_TSA(release_capability(__VA_ARGS__))
#define RETURN_CAPABILITY(x) ICEFLOE_TSA(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS ICEFLOE_TSA(no_thread_safety_analysis)
