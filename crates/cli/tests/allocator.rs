//! The allocator settings a memory budget makes (`ripple_cli::allocator`). The only test of
//! its binary: the harness then runs no other test thread beside it, as the settings ask.

use std::hint::black_box;

/// glibc takes the settings; before them, freeing a mapped buffer of 4 MiB raises glibc's
/// threshold, and a buffer of 1 MiB then comes from its heap; after them, a buffer of 2 MiB
/// (more than the heap has free) is mapped on its own, and unmapped when freed.
#[test]
fn buffers_are_mapped_on_their_own_after_the_settings() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let mapped = || {
        // SAFETY: the only test of this binary: no other thread allocates while glibc's
        // counts are read.
        unsafe { libc::mallinfo2() }.hblks
    };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let before = {
        drop(black_box(vec![1u8; 4 << 20]));
        let before = mapped();
        let from_heap = black_box(vec![1u8; 1 << 20]);
        assert_eq!(
            mapped(),
            before,
            "under glibc's raised threshold, from the heap"
        );
        drop(from_heap);
        before
    };
    // SAFETY: as above: the harness's main thread only waits for this test.
    let taken = unsafe { ripple_cli::allocator::give_back_freed_memory() };
    assert_eq!(taken, cfg!(all(target_os = "linux", target_env = "gnu")));
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let buffer = black_box(vec![7u8; 2 << 20]);
        assert_eq!(mapped(), before + 1, "the buffer has a mapping of its own");
        assert_eq!(buffer.iter().map(|&b| b as usize).sum::<usize>(), 7 << 21);
        drop(buffer);
        assert_eq!(mapped(), before, "and gives it back when freed");
    }
}
