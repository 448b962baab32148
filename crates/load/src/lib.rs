//! The load engine: a wrk-class HTTP/1.1 generator, closed and open loop, whose latency goes into
//! HDR histograms from a monotonic clock and whose counts are exact.
