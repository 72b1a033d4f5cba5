//! Everything that talks to the kernel's BPF side (the only aya user): the object and privileges,
//! struct layouts from BTF (parsed once per process), attaching hooks (and the `Backend`
//! choice), the tracer's programs, the socket iterator, maps, the ring buffer.
pub mod attach;
pub mod btf;
pub mod cache;
pub mod fnv;
pub mod iter;
pub mod log;
pub mod maps;
pub mod object;
pub mod ring;
pub mod tracer;
