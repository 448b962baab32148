//! Every way a server can answer (or fail to) lands in the right bucket with an exact count,
//! on both I/O backends.

mod common;

mod epoll {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Epoll;
    include!("cases/responses.rs");
}

mod uring {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Uring;
    include!("cases/responses.rs");
}
