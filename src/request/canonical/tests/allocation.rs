use super::*;

/// A thread-local allocation counter, to hold the fast path to "no allocation".
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Counting;

    thread_local! {
        static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    }

    // SAFETY: delegates every call to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            // SAFETY: same contract as the caller's.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: same contract as the caller's.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            // SAFETY: same contract as the caller's.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    /// How many allocations `f` made on this thread.
    pub fn allocations<T>(f: impl FnOnce() -> T) -> (usize, T) {
        let before = ALLOCATIONS.with(Cell::get);
        let value = f();
        (ALLOCATIONS.with(Cell::get) - before, value)
    }
}

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

#[test]
fn the_fast_path_does_not_allocate() {
    let (count, _) = counting::allocations(|| vec![1u8]);
    assert_eq!(count, 1, "the counter counts");
    for raw in [
        "/",
        "/drop/shoes?size=42&colour=red",
        "/static/app.3f2a.js",
        "/shoes%20red?q=%C3%A9",
        "/a.b/.c/..d",
    ] {
        let (count, target) =
            counting::allocations(|| canonical_target(&Method::GET, raw.as_bytes()));
        assert!(target.is_ok(), "{raw}");
        assert_eq!(count, 0, "{raw} allocated");
    }
    let (count, authority) = counting::allocations(|| Authority::parse(b"shop.example.com:443"));
    assert!(authority.is_ok());
    assert_eq!(count, 0, "a canonical host allocated");
    let lines: [&[u8]; 1] = [b"shop.example.com"];
    let (count, host) = counting::allocations(|| request_host(&lines, None, None));
    assert!(matches!(host, Ok(Some(_))));
    assert_eq!(count, 0, "request_host allocated");
    // A target that needs work allocates: the counter sees it.
    let (count, _) = counting::allocations(|| canonical_target(&Method::GET, b"/./drop"));
    assert!(count > 0);
}
