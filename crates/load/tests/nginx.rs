//! Against a real nginx: the client's counts equal the server's, the timeline adds up, the
//! hdr log holds every response, a stop ends the run with what was recorded, and the probe
//! reads headers and bodies. Runs on both I/O backends.

mod common;

mod epoll {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Epoll;
    include!("cases/nginx.rs");
}

mod uring {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Uring;
    include!("cases/nginx.rs");
}
