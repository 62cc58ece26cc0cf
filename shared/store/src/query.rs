//! query-handler reads (being written).
