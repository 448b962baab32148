//! Proxies under test: a neutral config model and one driver per proxy (nginx first).
