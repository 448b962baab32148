//! wrk-style text output of one load, followed by proxybench's own block.
