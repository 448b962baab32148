//! Theory the catalogue checks measurements against: models of what the proxy must do, computed
//! from the same inputs the run used.

pub mod limit_req;
