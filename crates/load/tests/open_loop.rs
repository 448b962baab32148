//! Open loop against a real nginx: even pacing holds its rate second by second; Poisson arrivals
//! repeat exactly with a seed (whatever the thread count) and have the right mean. Runs on both I/O backends.

mod epoll {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Epoll;
    include!("cases/open_loop.rs");
}

mod uring {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Uring;
    include!("cases/open_loop.rs");
}
