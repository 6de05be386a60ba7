//! What both datapaths' loaders and shims share: BPF arrays mapped into the shim
//! ([`mapped`]), the plain-old-data helpers for the `#[repr(C)]` mirrors ([`pod`]), and
//! ring-buffer draining into a queue of decoded events ([`ring`]), and the seeded generator of
//! their randomized tests ([`rng`]), the timer wheel that keeps idle flows off every tick
//! ([`wheel`]), and the mirrors of the standard program's fold both BPF programs run
//! ([`std_fold`]), and the epoll instance a shim sleeps on ([`wait`]), and the heap storage a loader opens its
//! skeleton into ([`object`]). With the `testing` feature, what their tests share ([`testing`]).

pub mod mapped;
pub mod object;
pub mod pod;
pub mod ring;
pub mod rng;
pub mod std_fold;
#[cfg(feature = "testing")]
pub mod testing;
pub mod wait;
pub mod wheel;
