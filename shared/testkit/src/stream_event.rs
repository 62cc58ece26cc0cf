//! Stream records as Lambda events (being written).
