//! Scenarios and the runner that plays them against a real proxy.
